package host

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeExec(t *testing.T, dir, name string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestScan(t *testing.T) {
	first, second, open := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	writeExec(t, open, "wsched-backend-inopen", 0o755)
	writeExec(t, first, "README", 0o644) // not a backend: ignored
	if err := os.Mkdir(filepath.Join(first, "wsched-backend-adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file   string
		perm   os.FileMode
		owner  int // -1: leave as created
		reason string
	}{
		{"wsched-backend-good", 0o755, -1, ""},
		{"wsched-backend-owner_only", 0o700, -1, ""},
		{"wsched-backend-open", 0o777, -1, "world-writable (mode 0777)"},
		{"wsched-backend-worldw", 0o757, -1, "world-writable (mode 0757)"},
		{"wsched-backend-groupw", 0o775, -1, "group-writable (mode 0775)"},
		{"wsched-backend-noexec", 0o644, -1, "not executable (mode 0644)"},
		{"wsched-backend-foreign", 0o755, 4242, "owned by uid 4242, not by root or the daemon's user (uid 1000)"},
		{"wsched-backend-bad.name", 0o755, -1, `"bad.name" is not a backend name: want letters, digits, '-' or '_'`},
	}
	want := map[string]string{filepath.Join(first, "wsched-backend-adir"): "not a regular file"}
	for _, tt := range tests {
		path := writeExec(t, first, tt.file, tt.perm)
		if tt.owner >= 0 {
			if err := os.Chown(path, tt.owner, tt.owner); err != nil {
				t.Logf("cannot chown (not root?): %v; skipping the ownership case", err)
				_ = os.Remove(path)
				continue
			}
		}
		want[path] = tt.reason
	}
	shadow := writeExec(t, second, "wsched-backend-good", 0o755)
	want[shadow] = "shadowed by " + filepath.Join(first, "wsched-backend-good")
	want[open] = "plugin directory is world-writable (mode 0777)"

	// uid 1000 plays the daemon's user: files owned by root (the test
	// runner) or by 1000 are trusted, others not.
	found, refused := Scan([]string{first, second, open, filepath.Join(first, "missing")}, 1000)
	got := map[string]string{}
	for _, b := range found {
		if b.Name != strings.TrimPrefix(filepath.Base(b.Path), BinaryPrefix) {
			t.Errorf("binary %s named %q", b.Path, b.Name)
		}
		got[b.Path] = ""
	}
	for _, r := range refused {
		got[r.Path] = r.Reason
	}
	if os.Geteuid() != 0 { // files are then owned by the runner, not root or 1000
		t.Skip("ownership rules need the tests to run as root")
	}
	for path, reason := range want {
		if g, ok := got[path]; !ok || g != reason {
			t.Errorf("%s: got %q (listed %v), want %q", filepath.Base(path), g, ok, reason)
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("unexpected entry %s: %q", path, got[path])
		}
	}
}

func TestValidName(t *testing.T) {
	for name, ok := range map[string]bool{
		"whisper": true, "sense-voice_2": true, "": false, "a.b": false, "a/b": false, "x~": false,
		strings.Repeat("a", 64): true, strings.Repeat("a", 65): false,
	} {
		if validName(name) != ok {
			t.Errorf("validName(%q) = %v, want %v", name, !ok, ok)
		}
	}
}

func TestAbsDirs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	got := absDirs("/usr/lib/wsched/plugins", "", "./bin", "/usr/lib/wsched/plugins")
	want := []string{"/usr/lib/wsched/plugins", filepath.Join(wd, "bin")}
	if !slices.Equal(got, want) {
		t.Errorf("absDirs = %q, want %q", got, want)
	}
}
