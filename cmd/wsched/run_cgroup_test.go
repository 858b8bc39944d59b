package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/cgroup"
)

// A child of `wsched run` that leaves its session (setsid) and would
// outlive the run is killed when the run ends: it is in the run's cgroup.
func TestRunEndKillsSetsidChild(t *testing.T) {
	m, err := cgroup.Open("/proc", "wsched-run-probe")
	if err != nil {
		t.Skipf("no writable cgroup hierarchy (uid %d): %v", os.Getuid(), err)
	}
	_ = m.Close()
	e := newE2E(t)
	e.serve()
	cmd := e.wsched("run", "--memory", "1GiB", "--", "sh", "-c", `setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!`)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("wsched run: %v\n%s", err, stderr.String())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(stdout.String()))
	if err != nil {
		t.Fatalf("child printed %q", stdout.String())
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(30 * time.Second); alive(pid); { // a hang, not a timing assertion
		if time.Now().After(deadline) {
			t.Fatalf("the setsid child %d outlived `wsched run`", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWithOwnPreload(t *testing.T) {
	env := map[string]string{"LD_PRELOAD": "/usr/lib/wsched/libwsched_cuda_cap.so", "X": "1"}
	got := withOwnPreload(env, "/opt/a.so:/usr/lib/wsched/libwsched_cuda_cap.so /opt/b.so")
	if got["LD_PRELOAD"] != "/usr/lib/wsched/libwsched_cuda_cap.so:/opt/a.so:/opt/b.so" || got["X"] != "1" {
		t.Errorf("joined %v", got)
	}
	if env["LD_PRELOAD"] != "/usr/lib/wsched/libwsched_cuda_cap.so" {
		t.Error("the lease's map was changed")
	}
	if got := withOwnPreload(map[string]string{"X": "1"}, "/opt/a.so"); got["LD_PRELOAD"] != "" {
		t.Errorf("a lease without the cap gained LD_PRELOAD: %v", got)
	}
}
