package packaging

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeShlibs creates a shlibs directory holding the given files (name → content).
func writeShlibs(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReadShlibs(t *testing.T) {
	dir := writeShlibs(t, map[string]string{
		"libc6:amd64.shlibs":       "libc 6 libc6 (>= 2.43)\nudeb: libc 6 libc6-udeb (>= 2.43)\n",
		"libwhisper1:amd64.shlibs": "libparakeet 1 libwhisper1 (>= 1.9.5+dfsg)\nlibwhisper 1 libwhisper1 (>= 1.9.5+dfsg)\n",
		"libfoo.shlibs":            "# comment\nlibfoo 1.2 libfoo1.2 | libfoo-compat\n\n",
		"ignored.txt":              "libbar 1 libbar1\n",
	})
	s, err := ReadShlibs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for soname, want := range map[string]string{
		"libc.so.6":       "libc6 (>= 2.43)",
		"libwhisper.so.1": "libwhisper1 (>= 1.9.5+dfsg)",
		"libfoo-1.2.so":   "libfoo1.2 | libfoo-compat",
	} {
		if got := s[soname]; got != want {
			t.Errorf("shlibs[%s] = %q, want %q", soname, got, want)
		}
	}
	if _, ok := s["libbar.so.1"]; ok {
		t.Error("read a file that does not end in .shlibs")
	}
}

// TestDependsOfSystemBinary reads a real dynamically linked binary of the build machine.
func TestDependsOfSystemBinary(t *testing.T) {
	const binary = "/usr/bin/ls" // coreutils: links libc.so.6 and libselinux.so.1 on Debian
	if _, err := os.Stat(binary); err != nil {
		t.Skip(binary, "missing")
	}
	libc := writeShlibs(t, map[string]string{"libc6.shlibs": "libc 6 libc6 (>= 2.99)\nld-linux-x86-64 2 libc6 (>= 2.99)\nld-linux-aarch64 1 libc6 (>= 2.99)\n"})
	s, err := ReadShlibs(libc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Depends(binary)
	if !errors.Is(err, ErrUnknownLibrary) || !strings.Contains(err.Error(), "libselinux.so.1") {
		t.Fatalf("Depends without a shlibs line for libselinux: err = %v, want ErrUnknownLibrary naming it", err)
	}

	s["libselinux.so.1"] = "libselinux1 (>= 3.1~)"
	deps, err := s.Depends(binary)
	if err != nil {
		t.Fatal(err)
	}
	if len(deps) != 2 || !strings.HasPrefix(deps[0], "libc6 (>= 2.") || deps[1] != "libselinux1 (>= 3.1~)" {
		t.Fatalf("Depends(%s) = %q; want libc6 from symbol versions (not the 2.99 of shlibs) and libselinux1", binary, deps)
	}
}

func TestDependsOfStaticBinary(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "static")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	deps, err := Shlibs{}.Depends(bin)
	if err != nil || len(deps) != 0 {
		t.Fatalf("Depends(static) = %q, %v; want none", deps, err)
	}
	if _, err := (Shlibs{}).Depends(src); !errors.Is(err, ErrNotELF) {
		t.Fatalf("Depends(source file) err = %v, want ErrNotELF", err)
	}
}

func TestParseDotted(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		ok   bool
	}{
		{"2.34", []int{2, 34}, true},
		{"2.2.5", []int{2, 2, 5}, true},
		{"PRIVATE", nil, false},
		{"2.x", nil, false},
	}
	for _, tt := range tests {
		got, ok := parseDotted(tt.in)
		if ok != tt.ok || !slices.Equal(got, tt.want) {
			t.Errorf("parseDotted(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
