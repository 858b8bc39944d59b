package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wsched/wsched/internal/testtmp"
)

// TestMain runs the tests in a TMPDIR of their own and fails when they leave
// anything there (backend sockets, copies of audio).
func TestMain(m *testing.M) { os.Exit(testtmp.Main(m)) }

// build compiles this command.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "wsched-backend-sherpa")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
