package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

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
