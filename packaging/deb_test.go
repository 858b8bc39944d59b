package packaging

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blakesmith/ar"
)

// entry is one line of a package listing: mode as ls prints it, and path as dpkg-deb -c prints it.
type entry struct {
	mode, path string
}

// wantListing is every file and explicitly owned directory of each package. Parent directories may
// appear besides these (drwxr-xr-x); nothing else may.
var wantListing = map[string][]entry{
	"wsched": {
		{"-rw-r--r--", "./etc/wsched/wsched.toml"},
		{"-rwxr-xr-x", "./usr/bin/wsched"},
		{"-rw-r--r--", "./usr/lib/systemd/system/wsched.service"},
		{"-rw-r--r--", "./usr/lib/systemd/system/wsched.socket"},
		{"-rw-r--r--", "./usr/lib/sysusers.d/wsched.conf"},
		{"-rw-r--r--", "./usr/lib/tmpfiles.d/wsched.conf"},
		{"drwxr-xr-x", "./usr/lib/wsched/plugins/"},
		{"-rw-r--r--", "./usr/lib/wsched/libwsched_cuda_cap.so"},
		{"-rw-r--r--", "./usr/share/doc/wsched/changelog.Debian.gz"},
		{"-rw-r--r--", "./usr/share/doc/wsched/copyright"},
		{"-rw-r--r--", "./usr/share/man/man1/wsched.1.gz"},
		{"-rw-r--r--", "./usr/share/wsched/prometheus/wsched-dashboard.json"},
		{"-rw-r--r--", "./usr/share/wsched/prometheus/wsched-rules.yml"},
	},
	"wsched-backend-whisper": {
		{"-rwxr-xr-x", "./usr/lib/wsched/plugins/wsched-backend-whisper"},
		{"-rw-r--r--", "./usr/share/doc/wsched-backend-whisper/changelog.Debian.gz"},
		{"-rw-r--r--", "./usr/share/doc/wsched-backend-whisper/copyright"},
	},
	"wsched-backend-sherpa": {
		{"-rwxr-xr-x", "./usr/lib/wsched/plugins/wsched-backend-sherpa"},
		{"-rw-r--r--", "./usr/lib/wsched/lib/sherpa/libonnxruntime.so"},
		{"-rw-r--r--", "./usr/lib/wsched/lib/sherpa/libsherpa-onnx-c-api.so"},
		{"-rw-r--r--", "./usr/share/lintian/overrides/wsched-backend-sherpa"},
		{"-rw-r--r--", "./usr/share/doc/wsched-backend-sherpa/changelog.Debian.gz"},
		{"-rw-r--r--", "./usr/share/doc/wsched-backend-sherpa/copyright"},
	},
	"wsched-backend-exec": {
		{"-rwxr-xr-x", "./usr/lib/wsched/plugins/wsched-backend-exec"},
		{"-rw-r--r--", "./usr/share/doc/wsched-backend-exec/changelog.Debian.gz"},
		{"-rw-r--r--", "./usr/share/doc/wsched-backend-exec/copyright"},
	},
}

// privateDirs are the directories of libraries a package may ship besides wantListing, which
// depend on how make deps obtained them (PrivateLibs): libraries 0644, a dynamic loader 0755.
var privateDirs = map[string]string{
	"wsched-backend-whisper": "./usr/lib/wsched/lib/whisper/",
	"wsched-backend-sherpa":  "./usr/lib/wsched/lib/sherpa/",
}

// bundledNotices holds the copyright files of the Debian packages a bundle's libraries come from.
const bundledNotices = "./usr/share/doc/wsched-backend-whisper/bundled/"

// checkListing compares a package's listing with wantListing[name].
func checkListing(t *testing.T, name string, got []entry) {
	t.Helper()
	want := wantListing[name]
	have := map[string]string{}
	for _, e := range got {
		have[e.path] = e.mode
	}
	for _, w := range want {
		if mode, ok := have[w.path]; !ok {
			t.Errorf("%s: %s missing", name, w.path)
		} else if mode != w.mode {
			t.Errorf("%s: %s has mode %s, want %s", name, w.path, mode, w.mode)
		}
	}
	for _, e := range got {
		if slices.ContainsFunc(want, func(w entry) bool { return w.path == e.path }) {
			continue
		}
		if name == "wsched-backend-whisper" && (e.mode == "-rw-r--r--" || e.mode == "drwxr-xr-x") &&
			(strings.HasPrefix(e.path, bundledNotices) || strings.HasPrefix("./usr/share/lintian/overrides/"+name, e.path)) {
			continue
		}
		if dir := privateDirs[name]; dir != "" && (strings.HasPrefix(e.path, dir) || strings.HasPrefix(dir, e.path)) &&
			(e.mode == "-rw-r--r--" || e.mode == "drwxr-xr-x" || (e.mode == "-rwxr-xr-x" && strings.HasPrefix(path.Base(e.path), "ld-linux"))) {
			continue
		}
		parent := e.mode == "drwxr-xr-x" && slices.ContainsFunc(want, func(w entry) bool {
			return strings.HasPrefix(w.path, e.path)
		})
		if !parent {
			t.Errorf("%s: unexpected entry %s %s", name, e.mode, e.path)
		}
	}
}

// TestBuildListing builds the packages from real ELF binaries and reads them back in-process: no
// dpkg needed, only strip(1) (binutils) and a Debian-like build machine for the shlibs.
func TestBuildListing(t *testing.T) {
	const binary = "/usr/bin/true"
	if _, err := exec.LookPath("strip"); err != nil {
		t.Skip("strip not installed")
	}
	shlibs, err := ReadShlibs(DefaultShlibsDir)
	if err != nil || len(shlibs) == 0 {
		t.Skip("no dpkg shlibs on this machine")
	}
	in := Inputs{Version: "1.2.3-1", Arch: "amd64", Maintainer: "T <t@example.org>",
		Date: time.Unix(1700000000, 0).UTC(), Dir: "."}
	config := filepath.Join(t.TempDir(), "wsched.toml")
	if err := os.WriteFile(config, []byte("[daemon]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Any shared library stands in for the allocation cap (make preload builds the real one).
	preload, _ := filepath.Glob("/usr/lib/*/libdl.so.2")
	if len(preload) == 0 {
		t.Skip("no libdl.so.2 to stand in for the preload library")
	}
	out := t.TempDir()
	whisper, err := BackendWhisper(in, binary, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Package{Wsched(in, binary, config, preload[0]), whisper, BackendExec(in, binary)} {
		deb, err := Build(context.Background(), p, in, shlibs, out)
		if err != nil {
			t.Fatal(err)
		}
		if want := p.Name + "_1.2.3-1_amd64.deb"; filepath.Base(deb) != want {
			t.Errorf("package file %s, want %s", filepath.Base(deb), want)
		}
		checkListing(t, p.Name, readDebListing(t, deb))
	}
}

// readDebListing lists data.tar.gz of a .deb (an ar archive) the way dpkg-deb -c does.
func readDebListing(t *testing.T, deb string) []entry {
	t.Helper()
	f, err := os.Open(deb)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := ar.NewReader(f)
	for {
		hdr, err := r.Next()
		if err != nil {
			t.Fatalf("%s: no data.tar.gz: %v", deb, err)
		}
		if strings.TrimRight(hdr.Name, "/") == "data.tar.gz" {
			return tarListing(t, r)
		}
	}
}

func tarListing(t *testing.T, r io.Reader) []entry {
	t.Helper()
	zr, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []entry
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{hdr.FileInfo().Mode().String(), hdr.Name})
	}
}

// TestDpkgListing checks the packages `make deb` wrote with dpkg-deb itself. It runs when
// WSCHED_DEB_DIR names that directory (make packaging-test sets it), so that a plain `go test ./...`
// needs neither dpkg nor a package build.
func TestDpkgListing(t *testing.T) {
	dir := os.Getenv("WSCHED_DEB_DIR")
	if dir == "" {
		t.Skip("WSCHED_DEB_DIR not set (make packaging-test sets it)")
	}
	for name := range wantListing {
		t.Run(name, func(t *testing.T) {
			debs, _ := filepath.Glob(filepath.Join(dir, name+"_*.deb"))
			if len(debs) == 0 && name != "wsched" {
				t.Skip("not built")
			}
			if len(debs) != 1 {
				t.Fatalf("want one %s_*.deb in %s, found %q", name, dir, debs)
			}
			checkListing(t, name, dpkgListing(t, debs[0]))
			checkControl(t, name, debs[0])
		})
	}
}

// dpkgListing parses `dpkg-deb -c`: mode, owner/group, size, date, time, path.
func dpkgListing(t *testing.T, deb string) []entry {
	t.Helper()
	out, err := exec.Command("dpkg-deb", "-c", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb -c %s: %v", deb, err)
	}
	var list []entry
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 {
			t.Fatalf("dpkg-deb -c line %q", line)
		}
		if f[1] != "root/root" && f[1] != "0/0" {
			t.Errorf("%s owned by %s, want root", f[5], f[1])
		}
		list = append(list, entry{f[0], f[5]})
	}
	return list
}

// checkControl checks the control fields and files that the listing does not show.
func checkControl(t *testing.T, name, deb string) {
	t.Helper()
	field := func(f string) string {
		out, err := exec.Command("dpkg-deb", "-f", deb, f).Output()
		if err != nil {
			t.Fatalf("dpkg-deb -f %s %s: %v", deb, f, err)
		}
		return strings.TrimSpace(string(out))
	}
	version, depends := field("Version"), field("Depends")
	if want := fmt.Sprintf("%s_%s_%s.deb", name, version, field("Architecture")); path.Base(deb) != want {
		t.Errorf("file name %s, control says %s", path.Base(deb), want)
	}
	switch name {
	case "wsched":
		if !strings.HasPrefix(depends, "libc6") {
			t.Errorf("wsched Depends %q, want libc6", depends)
		}
		conffiles, err := exec.Command("dpkg-deb", "-I", deb, "conffiles").Output()
		if err != nil || strings.TrimSpace(string(conffiles)) != ConfigFile {
			t.Errorf("conffiles = %q (%v), want %s", conffiles, err, ConfigFile)
		}
		for _, script := range []string{"postinst", "prerm", "postrm"} {
			if err := exec.Command("dpkg-deb", "-I", deb, script).Run(); err != nil {
				t.Errorf("no %s: %v", script, err)
			}
		}
	case "wsched-backend-whisper":
		// Debian's libwhisper1 (route system), or whisper.cpp shipped in the package.
		private := slices.ContainsFunc(dpkgListing(t, deb), func(e entry) bool {
			return strings.HasPrefix(e.path, privateDirs[name]+"libwhisper.so.")
		})
		if !private && !strings.Contains(depends, "libwhisper1 (>=") {
			t.Errorf("backend Depends %q lacks libwhisper1, and the package ships no libwhisper", depends)
		}
		if private && strings.Contains(depends, "libwhisper") {
			t.Errorf("backend Depends %q names libwhisper although it ships its own", depends)
		}
		fallthrough
	case "wsched-backend-sherpa", "wsched-backend-exec":
		if !strings.Contains(depends, "wsched (= "+version+")") {
			t.Errorf("%s Depends %q lacks wsched (= %s)", name, depends, version)
		}
	}
}
