package packaging

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goreleaser/chglog"
	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
)

// Build writes p as a .deb into outDir (named the Debian way, NAME_VERSION_ARCH.deb) and returns its
// path. The dependencies of the ELF binaries in p come from shlibs; the binaries are packaged
// stripped; a Debian changelog and a copyright file (debian/copyright plus the Go modules linked into
// the binaries) are added.
func Build(ctx context.Context, p Package, in Inputs, shlibs Shlibs, outDir string) (string, error) {
	depends, err := p.depends(shlibs)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", p.Name, err)
	}
	tmp, err := os.MkdirTemp("", "mkdeb-"+p.Name+"-*")
	if err != nil {
		return "", fmt.Errorf("build %s: %w", p.Name, err)
	}
	defer os.RemoveAll(tmp)
	staged, err := stage(ctx, p, tmp)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", p.Name, err)
	}
	changelog, err := writeChangelog(tmp, p, in)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", p.Name, err)
	}
	copyright, err := writeCopyright(tmp, p, in)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", p.Name, err)
	}
	info := staged.info(in, depends, changelog, copyright)
	out := filepath.Join(outDir, deb.Default.ConventionalFileName(info))
	if err := writeDeb(info, out); err != nil {
		return "", fmt.Errorf("build %s: %w", p.Name, err)
	}
	return out, nil
}

// depends is p.Depends plus what its executables and private libraries link against, less the
// libraries it ships.
func (p Package) depends(shlibs Shlibs) ([]string, error) {
	deps := slices.Clone(p.Depends)
	private := map[string]bool{}
	for _, f := range p.Files {
		if f.Library {
			private[filepath.Base(f.Dst)] = true
		}
	}
	for _, f := range p.Files {
		if !isExecutable(f) && !f.Library {
			continue
		}
		libs, err := shlibs.DependsExcept(f.Src, private)
		if err != nil {
			return nil, err
		}
		deps = append(deps, libs...)
	}
	return mergeMinimums(deps), nil
}

// mergeMinimums sorts deps and keeps, of several "NAME (>= VERSION)" for one NAME (libc6 from each
// binary's symbol versions), the highest; other dependencies stay as they are, duplicates removed.
func mergeMinimums(deps []string) []string {
	best := map[string]string{}
	var out []string
	for _, d := range deps {
		name, v, ok := strings.Cut(d, " (>= ")
		parsed, numeric := parseDotted(strings.TrimSuffix(v, ")"))
		if !ok || !numeric {
			out = append(out, d)
			continue
		}
		if cur, seen := best[name]; !seen || slices.Compare(parsed, mustDotted(cur)) > 0 {
			best[name] = strings.TrimSuffix(v, ")")
		}
	}
	for name, v := range best {
		out = append(out, name+" (>= "+v+")")
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func mustDotted(v string) []int {
	p, _ := parseDotted(v)
	return p
}

// info is the nfpm description of p.
func (p Package) info(in Inputs, depends []string, changelog, copyright string) *nfpm.Info {
	contents := files.Contents{{
		Source:      copyright,
		Destination: "/usr/share/doc/" + p.Name + "/copyright",
		FileInfo:    &files.ContentFileInfo{Mode: 0o644, MTime: in.Date},
	}}
	for _, f := range p.Files {
		c := &files.Content{
			Source:      f.Src,
			Destination: f.Dst,
			FileInfo:    &files.ContentFileInfo{Mode: f.Mode, MTime: in.Date},
		}
		switch {
		case f.Src == "":
			c.Type = files.TypeDir
		case f.Conffile:
			c.Type = files.TypeConfig
		}
		contents = append(contents, c)
	}
	info := &nfpm.Info{
		Name:          p.Name,
		Arch:          in.Arch,
		Platform:      "linux",
		Version:       in.Version,
		VersionSchema: "none", // already a Debian version; nfpm's semver parsing would reorder it
		Section:       "admin",
		Priority:      "optional",
		Maintainer:    in.Maintainer,
		Description:   p.Synopsis + "\n" + wrap(p.Description, 72),
		Homepage:      Homepage,
		Changelog:     changelog,
		MTime:         in.Date,
		Overridables: nfpm.Overridables{
			Depends:    depends,
			Recommends: p.Recommends,
			Contents:   contents,
			Umask:      0o022,
			Scripts: nfpm.Scripts{
				PostInstall: p.Scripts.PostInst,
				PreRemove:   p.Scripts.PreRm,
				PostRemove:  p.Scripts.PostRm,
			},
		},
	}
	return nfpm.WithDefaults(info)
}

// writeDeb packages info into the file out.
func writeDeb(info *nfpm.Info, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := deb.Default.Package(info, f); err != nil {
		f.Close()
		os.Remove(out)
		return fmt.Errorf("nfpm deb: %w", err)
	}
	return f.Close()
}

// writeChangelog writes the one-entry changelog (chglog's YAML, which nfpm turns into
// changelog.Debian.gz) of this build.
func writeChangelog(dir string, p Package, in Inputs) (string, error) {
	entries := chglog.ChangeLogEntries{{
		ChangeLogOverridables: chglog.ChangeLogOverridables{
			Deb: &chglog.ChangelogDeb{Urgency: "medium", Distributions: []string{"unstable"}},
		},
		Semver:   in.Version,
		Date:     in.Date.UTC(),
		Packager: in.Maintainer,
		Changes: chglog.ChangeLogChanges{{
			Note: "Built from the wsched source tree.",
		}},
	}}
	path := filepath.Join(dir, "changelog.yml")
	if err := entries.Save(path); err != nil {
		return "", fmt.Errorf("write changelog: %w", err)
	}
	return path, nil
}

// writeCopyright writes debian/copyright followed by the Go modules linked into p's binaries, whose
// notices the binary package carries along.
func writeCopyright(dir string, p Package, in Inputs) (string, error) {
	base, err := os.ReadFile(filepath.Join(in.Dir, "debian", "copyright"))
	if err != nil {
		return "", fmt.Errorf("write copyright: %w", err)
	}
	var modules []string
	for _, f := range p.Files {
		if !isExecutable(f) {
			continue
		}
		bi, err := buildinfo.ReadFile(f.Src)
		if err != nil {
			continue // not a Go binary
		}
		for _, m := range bi.Deps {
			modules = append(modules, " "+m.Path+" "+m.Version)
		}
	}
	slices.Sort(modules)
	modules = slices.Compact(modules)
	text := strings.TrimRight(string(base), "\n") + "\n"
	if len(modules) > 0 {
		text += "\nFiles: " + strings.Join(binaryPaths(p), " ") + "\n" +
			"Copyright: the authors of each Go module below\n" +
			"License: various\n" +
			" The binaries statically link these Go modules; each module's license is in its\n" +
			" source (go mod download MODULE@VERSION):\n" +
			strings.Join(modules, "\n") + "\n"
	}
	path := filepath.Join(dir, "copyright")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return "", fmt.Errorf("write copyright: %w", err)
	}
	return path, nil
}

// wrap breaks text into lines of at most width bytes (longer words stay whole), as Debian wants
// for extended descriptions.
func wrap(text string, width int) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// binaryPaths lists the executables of p as DEP-5 Files patterns (relative paths).
func binaryPaths(p Package) []string {
	var out []string
	for _, f := range p.Files {
		if isExecutable(f) {
			out = append(out, strings.TrimPrefix(f.Dst, "/"))
		}
	}
	return out
}
