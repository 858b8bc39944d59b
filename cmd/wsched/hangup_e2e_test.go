package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHangupDiscoversBackends: `wsched serve` asks the plugin directories
// for backends again on SIGHUP: a backend dropped in while it runs (the
// drop-in of daemon/testdata/dropin) has its models served afterwards,
// without a restart.
func TestHangupDiscoversBackends(t *testing.T) {
	e := newE2E(t)
	plugins, models := filepath.Join(e.dir, "plugins"), filepath.Join(e.dir, "models")
	for _, d := range []string{plugins, models} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(models, "hello.echo"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.appendConfig(fmt.Sprintf("[backends]\nplugin_dir = %q\ndev_dirs = []\n[models]\ndir = %q\n", plugins, models))
	daemon := e.serve()
	if body := getUnix(t, e.socket, "/v1/models"); strings.Contains(body, `"hello"`) {
		t.Fatalf("hello served before its backend is there: %s", body)
	}
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(plugins, "wsched-backend-echo"), "../../daemon/testdata/dropin").CombinedOutput()
	if err != nil {
		t.Fatalf("build the drop-in backend: %v\n%s", err, out)
	}
	if err := daemon.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(getUnix(t, e.socket, "/v1/models"), `"hello"`) {
		if time.Now().After(deadline) {
			t.Fatalf("hello not served 30s after SIGHUP: %s", getUnix(t, e.socket, "/v1/models"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
