package packaging

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPrivateLibs: the libraries a binary needs from a directory are found through each other and
// shipped under their sonames; the package then depends on nothing they provide.
func TestPrivateLibs(t *testing.T) {
	const binary = "/usr/bin/true" // needs libc.so.6, which needs ld-linux
	libc, err := filepath.EvalSymlinks("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Skip("no x86_64 glibc here")
	}
	src := t.TempDir()
	if err := os.Symlink(libc, filepath.Join(src, "libc.so.6")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "libunused.so.1"), []byte("not needed"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := PrivateLibs(src, "/usr/lib/wsched/lib/test", binary)
	if err != nil {
		t.Fatal(err)
	}
	want := []File{{Src: libc, Dst: "/usr/lib/wsched/lib/test/libc.so.6", Mode: 0o644, Library: true}}
	if !slices.Equal(files, want) {
		t.Fatalf("PrivateLibs = %+v, want %+v", files, want)
	}
	shlibs, err := ReadShlibs(DefaultShlibsDir)
	if err != nil || len(shlibs) == 0 {
		t.Skip("no dpkg shlibs on this machine")
	}
	p := Package{Files: append([]File{{Src: binary, Dst: "/usr/bin/x", Mode: 0o755}}, files...)}
	deps, err := p.depends(shlibs)
	if err != nil {
		t.Fatal(err)
	}
	// true needs only libc (shipped); the shipped libc needs the loader, which is Debian's libc6.
	if len(deps) != 1 || !strings.HasPrefix(deps[0], "libc6") {
		t.Errorf("depends = %q, want only libc6 for the loader", deps)
	}
}

// TestSetRunpath rewrites the RUNPATH of a freshly linked program and the program still runs.
func TestSetRunpath(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "p.c"), filepath.Join(dir, "p")
	if err := os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	long := "/root/go/pkg/mod/example.com/module@v1.0.0/lib/x86_64-unknown-linux-gnu"
	if out, err := exec.Command(gcc, "-o", bin, src, "-Wl,-rpath,"+long).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, out)
	}
	if err := SetRunpath(bin, strings.Repeat("x", len(long)+1)); err == nil {
		t.Error("SetRunpath accepted a longer runpath")
	}
	if err := SetRunpath(bin, "/usr/lib/wsched/lib/sherpa"); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rp, _ := f.DynString(elf.DT_RUNPATH)
	rpath, _ := f.DynString(elf.DT_RPATH)
	if got := append(rp, rpath...); !slices.Equal(got, []string{"/usr/lib/wsched/lib/sherpa"}) {
		t.Errorf("runpath after SetRunpath = %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin).CombinedOutput(); err != nil {
		t.Errorf("program with the new runpath: %v: %s", err, out)
	}
}

// TestPackagedConfig: the packaged configuration searches no development directory and names the
// models directory under the state directory; a default file without those lines is an error.
func TestPackagedConfig(t *testing.T) {
	src, err := os.ReadFile("../wsched.toml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := PackagedConfig(src)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(got), "\n")
	for _, want := range []string{`dev_dirs = []`, `dir = "/var/lib/wsched/models"`} {
		if !slices.Contains(lines, want) {
			t.Errorf("packaged configuration lacks %q", want)
		}
	}
	if slices.Contains(lines, `dev_dirs = ["./bin"]`) {
		t.Error("packaged configuration still searches ./bin")
	}
	if _, err := PackagedConfig([]byte("[backends]\n")); err == nil {
		t.Error("PackagedConfig of a file without the lines succeeded")
	}
}

// FuzzRunpath: the ELF reading behind PrivateLibs and SetRunpath never panics on a damaged file, and
// a runpath it finds lies inside the file.
func FuzzRunpath(f *testing.F) {
	if data, err := os.ReadFile("/usr/bin/true"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "elf")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, _ = elfNeeds(path)
		ef, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			return
		}
		off, old, err := runpathOffset(ef)
		if err == nil && (off < 0 || off+int64(len(old)) > int64(len(data))) {
			t.Errorf("runpath %q at %d outside the file (%d bytes)", old, off, len(data))
		}
	})
}
