package packaging

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// DefaultShlibsDir is where dpkg keeps the shlibs files of installed packages.
const DefaultShlibsDir = "/var/lib/dpkg/info"

// libcPackage is the package whose dependency is computed from symbol versions instead of its shlibs
// line: that line names the build machine's glibc, far stricter than what a binary needs.
const libcPackage = "libc6"

// Shlibs maps shared-library sonames to the dependency that provides them, as read from dpkg's shlibs
// files: the same data dpkg-shlibdeps uses.
type Shlibs map[string]string

// ReadShlibs reads every *.shlibs file in dir (normally DefaultShlibsDir).
func ReadShlibs(dir string) (Shlibs, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.shlibs"))
	if err != nil {
		return nil, fmt.Errorf("read shlibs in %s: %w", dir, err)
	}
	s := Shlibs{}
	for _, p := range paths {
		if err := s.readFile(p); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// readFile adds the lines of one shlibs file: "[type:] library soversion dependency…".
func (s Shlibs) readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read shlibs: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 && strings.HasSuffix(fields[0], ":") {
			continue // udeb: and other package types
		}
		if len(fields) < 3 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		dep := strings.Join(fields[2:], " ")
		s[fields[0]+".so."+fields[1]] = dep    // libfoo 1 → libfoo.so.1
		s[fields[0]+"-"+fields[1]+".so"] = dep // libfoo 1.2 → libfoo-1.2.so (version before .so)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read shlibs %s: %w", path, err)
	}
	return nil
}

// Depends returns the Debian dependencies of an ELF binary: one per package that provides a library
// in its DT_NEEDED list, libc6 with the newest GLIBC_x.y symbol version the binary uses. A statically
// linked binary has none. A library no shlibs entry names is an error wrapping ErrUnknownLibrary.
func (s Shlibs) Depends(binary string) ([]string, error) { return s.DependsExcept(binary, nil) }

// DependsExcept is Depends for a binary of a package that ships some libraries itself (private:
// their sonames, and the loader's, as file names): those need no dependency. A package that ships
// its own libc and loader depends on no libc6 at all.
func (s Shlibs) DependsExcept(binary string, private map[string]bool) ([]string, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return nil, fmt.Errorf("dependencies of %s: %w: %w", binary, ErrNotELF, err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("dependencies of %s: read DT_NEEDED: %w", binary, err)
	}
	interp, err := interpreter(f)
	if err != nil {
		return nil, fmt.Errorf("dependencies of %s: %w", binary, err)
	}
	if interp != "" {
		libs = append(libs, interp) // the dynamic loader: a Go PIE may link nothing else
	}
	var deps, unknown []string
	for _, lib := range libs {
		dep, ok := s[lib]
		switch {
		case private[lib]:
		case !ok:
			unknown = append(unknown, lib)
		case packageName(dep) == libcPackage:
			glibc, err := newestGlibc(f)
			if err != nil {
				return nil, fmt.Errorf("dependencies of %s: %w", binary, err)
			}
			dep = libcPackage
			if glibc != "" {
				dep += " (>= " + glibc + ")"
			}
			deps = append(deps, dep)
		default:
			deps = append(deps, dep)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("dependencies of %s: %s: %w", binary, strings.Join(unknown, ", "), ErrUnknownLibrary)
	}
	slices.Sort(deps)
	return slices.Compact(deps), nil
}

// interpreter returns the file name of the binary's dynamic loader (PT_INTERP), e.g.
// "ld-linux-x86-64.so.2", or "" for a static binary.
func interpreter(f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		data, err := io.ReadAll(p.Open())
		if err != nil {
			return "", fmt.Errorf("read PT_INTERP: %w", err)
		}
		return filepath.Base(strings.TrimRight(string(data), "\x00")), nil
	}
	return "", nil
}

// packageName is the first word of a dependency: "libc6 (>= 2.36)" → "libc6".
func packageName(dep string) string {
	name, _, _ := strings.Cut(strings.TrimSpace(dep), " ")
	return name
}

// newestGlibc returns the highest GLIBC_x.y version the binary needs ("" when it names none).
func newestGlibc(f *elf.File) (string, error) {
	if f.SectionByType(elf.SHT_GNU_VERSYM) == nil {
		return "", nil // no symbol versions at all (a Go PIE that only needs the loader)
	}
	needs, err := f.DynamicVersionNeeds()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return "", fmt.Errorf("read symbol versions: %w", err)
	}
	var best []int
	for _, need := range needs {
		for _, dep := range need.Needs {
			v, ok := strings.CutPrefix(dep.Dep, "GLIBC_")
			if !ok {
				continue
			}
			if parsed, ok := parseDotted(v); ok && slices.Compare(parsed, best) > 0 {
				best = parsed
			}
		}
	}
	parts := make([]string, len(best))
	for i, n := range best {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, "."), nil
}

// parseDotted parses "2.34" into [2 34]; GLIBC_PRIVATE and the like are not versions.
func parseDotted(v string) ([]int, bool) {
	var out []int
	for _, p := range strings.Split(v, ".") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}
