package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/testtmp"
	"github.com/wsched/wsched/plugins/execbackend"
	"github.com/wsched/wsched/plugins/host"
)

func TestMain(m *testing.M) { os.Exit(testtmp.Main(m)) }

// TestCheck builds the binary and runs `wsched backends check`'s code on
// it: the handshake, Info, and discovery's verdict.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "wsched-backend-exec")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	res, err := host.Check(t.Context(), bin, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	i := res.Info
	if res.Name != execbackend.Name || i.Name != execbackend.Name || !slices.Equal(i.Devices, []string{"cpu", "cuda"}) ||
		res.Refusal != "" || i.Metadata["protocols"] != "openai,multipart" {
		t.Errorf("check: %+v", res)
	}
}
