package plugintest

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// FakePackage is the import path of the fake backend's main package.
const FakePackage = "github.com/wsched/wsched/plugins/plugintest/fakebackend"

// FakeBinaryName is the name Build gives the binary, following the
// wsched-backend-NAME convention so plugin discovery finds it.
const FakeBinaryName = "wsched-backend-fake"

// Build compiles the fake backend into a fresh temporary directory and
// returns the binary's path. It needs the go command on PATH.
func Build(t testing.TB) string {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("plugintest: build fake backend: %v", err)
	}
	bin := filepath.Join(t.TempDir(), FakeBinaryName)
	cmd := exec.CommandContext(t.Context(), gocmd, "build", "-o", bin, FakePackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("plugintest: go build %s: %v\n%s", FakePackage, err, out)
	}
	return bin
}
