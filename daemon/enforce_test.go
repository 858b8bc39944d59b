package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/cgroup"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/jobs"
)

// An exec backend's app that leaves a setsid child behind (a worker that
// outlives its parent) loses it when the instance stops (evicted here):
// the instance's cgroup is killed whole.
func TestExecInstanceStopKillsSetsidChild(t *testing.T) {
	if m, err := cgroup.Open("/proc", "wsched-daemon-probe"); err != nil {
		t.Skipf("no writable cgroup hierarchy (uid %d): %v", os.Getuid(), err)
	} else {
		_ = m.Close()
	}
	td, state := execDaemon(t, nil, func(c *config.Config) {
		c.Models.Entries[0].Command = []string{"sh", "-c",
			`setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "$APP_STATE_DIR/orphan"; exec python3 main.py`}
	})
	audio := testshared.File(t, "audio/jfk.wav")
	if got := td.waitJob(t, td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio)).ID, finished); got.State != jobs.Completed {
		t.Fatalf("sensevoice job: %s %s", got.State, got.Error)
	}
	orphan, err := strconv.Atoi(readFile(t, filepath.Join(state, "orphan")))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(orphan, syscall.SIGKILL)
	if exited(orphan) {
		t.Fatalf("the setsid child %d is not running while its app runs", orphan)
	}
	if got := td.waitJob(t, td.submit(t, fmt.Sprintf(`{"audio_path": %q, "model": "fake-tiny"}`, audio)).ID, finished); got.State != jobs.Completed {
		t.Fatalf("fake-tiny job: %s %s", got.State, got.Error)
	}
	td.leasesBy(t, "fake")
	for deadline := time.Now().Add(30 * time.Second); !exited(orphan); { // a hang, not a timing assertion
		if time.Now().After(deadline) {
			t.Fatalf("the app's setsid child %d outlived its evicted instance", orphan)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// [enforcement] mps = "manage": the daemon starts an MPS control daemon
// (a stand-in here) with its pipes under the state directory, takes the mps
// tier, gives a lease's holder its pinned-memory limit, and stops it.
func TestManagedMPSTier(t *testing.T) {
	bin := t.TempDir()
	script := `#!/bin/sh
if [ "$1" = "-d" ]; then mkfifo "$CUDA_MPS_PIPE_DIRECTORY/control"; exit; fi
read cmd
[ "$cmd" = quit ] && rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"
`
	if err := os.WriteFile(filepath.Join(bin, "nvidia-cuda-mps-control"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	td := startDaemon(t, 1, 24*GiB, func(c *config.Config) { c.Enforcement.MPS = "manage" })
	pipe := filepath.Join(td.cfg.Daemon.StateDir, "mps", "pipe")
	g, err := td.c.GPUs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if e := g.GPUs[0].Enforcement; e == nil || e.Tier != "mps" || !strings.Contains(e.Reason, pipe) {
		t.Fatalf("GPU enforcement %+v, want mps through %s", e, pipe)
	}
	l, err := td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: GiB})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.Env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], g.GPUs[0].UUID+"=1024M"; got != want || l.Env["CUDA_MPS_PIPE_DIRECTORY"] != pipe {
		t.Errorf("lease env %v, want CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%s and the pipe %s", l.Env, want, pipe)
	}
	td.stop()
	if _, err := os.Stat(filepath.Join(pipe, "control")); err == nil {
		t.Error("the MPS control daemon was not asked to quit")
	}
}
