package packaging

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// PrivateLibDir is where a backend package keeps the shared libraries it ships itself, one
// subdirectory per backend (PrivateLibDir + "/whisper"): libraries Debian does not have in the
// target release, found by the backend through its RPATH/RUNPATH and never by anything else.
const PrivateLibDir = "/usr/lib/wsched/lib"

// PrivateLibs returns, as package files under dst, every shared library in src that the ELF files
// roots need, directly or through each other (DT_NEEDED by soname), and the dynamic loader when a
// root's PT_INTERP names one under dst. A library src does not have is left to the package's
// dependencies (Shlibs). Symbolic links in src are followed: each library is one file named by its
// soname. Libraries are mode 0644, the loader 0755 (the kernel maps it only when executable).
func PrivateLibs(src, dst string, roots ...string) ([]File, error) {
	var out []File
	seen := map[string]bool{}
	queue := slices.Clone(roots)
	for len(queue) > 0 {
		elfPath := queue[0]
		queue = queue[1:]
		needed, interp, err := elfNeeds(elfPath)
		if err != nil {
			return nil, fmt.Errorf("private libraries: %w", err)
		}
		if interp != "" && filepath.Dir(interp) == dst {
			needed = append(needed, filepath.Base(interp))
		}
		for _, soname := range needed {
			if seen[soname] {
				continue
			}
			seen[soname] = true
			lib, err := filepath.EvalSymlinks(filepath.Join(src, soname))
			if errors.Is(err, os.ErrNotExist) {
				continue
			} else if err != nil {
				return nil, fmt.Errorf("private libraries: %w", err)
			}
			mode := os.FileMode(0o644)
			if interp != "" && soname == filepath.Base(interp) {
				mode = 0o755
			}
			out = append(out, File{Src: lib, Dst: dst + "/" + soname, Mode: mode, Library: true})
			queue = append(queue, lib)
		}
	}
	return out, nil
}

// elfNeeds returns the DT_NEEDED sonames and the PT_INTERP path of an ELF file.
func elfNeeds(path string) (needed []string, interp string, err error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w: %w", path, ErrNotELF, err)
	}
	defer f.Close()
	needed, err = f.ImportedLibraries()
	if err != nil {
		return nil, "", fmt.Errorf("%s: read DT_NEEDED: %w", path, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			data, err := io.ReadAll(p.Open())
			if err != nil {
				return nil, "", fmt.Errorf("%s: read PT_INTERP: %w", path, err)
			}
			interp = strings.TrimRight(string(data), "\x00")
		}
	}
	return needed, interp, nil
}

// SetRunpath replaces the DT_RUNPATH (or DT_RPATH) string of a 64-bit little-endian ELF file in
// place with runpath, padding with NUL bytes, as chrpath(1) does. The new value may not be longer
// than the old one: cgo's #cgo LDFLAGS add an rpath into the Go module cache that a packaged binary
// must not keep, and it is always longer than a /usr/lib path.
func SetRunpath(path, runpath string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("set runpath of %s: %w: %w", path, ErrNotELF, err)
	}
	off, old, err := runpathOffset(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("set runpath of %s: %w", path, err)
	}
	if len(runpath) > len(old) {
		return fmt.Errorf("set runpath of %s: %q is longer than the old %q", path, runpath, old)
	}
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("set runpath: %w", err)
	}
	buf := make([]byte, len(old))
	copy(buf, runpath)
	if _, err := w.WriteAt(buf, off); err != nil {
		w.Close()
		return fmt.Errorf("set runpath of %s: %w", path, err)
	}
	return w.Close()
}

// hasRunpath reports whether an ELF file has a DT_RUNPATH or DT_RPATH.
func hasRunpath(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	_, _, err = runpathOffset(f)
	return err == nil
}

// runpathOffset finds the file offset and value of the DT_RUNPATH (else DT_RPATH) string.
func runpathOffset(f *elf.File) (int64, string, error) {
	if f.Class != elf.ELFCLASS64 || f.ByteOrder != binary.LittleEndian {
		return 0, "", errors.New("only 64-bit little-endian ELF files are supported")
	}
	dyn, dynstr := f.SectionByType(elf.SHT_DYNAMIC), f.Section(".dynstr")
	if dyn == nil || dynstr == nil {
		return 0, "", errors.New("no dynamic section")
	}
	data, err := dyn.Data()
	if err != nil {
		return 0, "", fmt.Errorf("read .dynamic: %w", err)
	}
	var strOff uint64
	found := false
	for i := 0; i+16 <= len(data); i += 16 {
		tag := elf.DynTag(binary.LittleEndian.Uint64(data[i:]))
		val := binary.LittleEndian.Uint64(data[i+8:])
		if tag == elf.DT_RUNPATH || (tag == elf.DT_RPATH && !found) {
			strOff, found = val, true
		}
	}
	if !found {
		return 0, "", errors.New("no DT_RUNPATH or DT_RPATH")
	}
	strs, err := dynstr.Data()
	if err != nil || strOff >= uint64(len(strs)) {
		return 0, "", fmt.Errorf("read .dynstr: %v", err)
	}
	end := slices.Index(strs[strOff:], 0)
	if end < 0 {
		return 0, "", errors.New("unterminated runpath string")
	}
	return int64(dynstr.Offset + strOff), string(strs[strOff : strOff+uint64(end)]), nil
}
