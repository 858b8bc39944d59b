package enforce

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeMPSControl writes a stand-in for nvidia-cuda-mps-control: -d makes
// the control pipe; otherwise it reads a command, and quit removes it.
func fakeMPSControl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), MPSControlBin)
	script := `#!/bin/sh
if [ "$1" = "-d" ]; then mkfifo "$CUDA_MPS_PIPE_DIRECTORY/control" && echo started >> "$CUDA_MPS_LOG_DIRECTORY/control.log"; exit; fi
read cmd
echo "$cmd" >> "$CUDA_MPS_LOG_DIRECTORY/control.log"
[ "$cmd" = quit ] && rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// mode mps = "manage": the daemon's own MPS control daemon, with its pipe
// under the state directory, is what Probe finds, so auto takes mps; Stop
// asks it to quit.
func TestManagedMPS(t *testing.T) {
	bin, dir := fakeMPSControl(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := StartMPS(ctx, bin, filepath.Join(dir, "mps"))
	if err != nil {
		t.Fatal(err)
	}
	f := Probe("/proc", "550.1", m.LookupEnv(func(string) (string, bool) { return "", false }), nil, "")
	if f.MPSPipe != m.PipeDir {
		t.Fatalf("probe found pipe %q, want %q", f.MPSPipe, m.PipeDir)
	}
	if c := Choose("auto", f); c.Tier != MPS {
		t.Errorf("auto with a managed MPS: %+v", c)
	}
	if err := m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(filepath.Join(m.LogDir, "control.log"))
	if _, err := os.Stat(filepath.Join(m.PipeDir, "control")); err == nil || strings.TrimSpace(string(log)) != "started\nquit" {
		t.Errorf("after Stop: pipe still there (%v) or log %q", err, log)
	}
}

func TestManagedMPSFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := StartMPS(ctx, filepath.Join(t.TempDir(), "absent"), t.TempDir()); err == nil {
		t.Error("started an MPS control daemon from a program that does not exist")
	}
}
