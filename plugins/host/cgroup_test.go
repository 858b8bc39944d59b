package host

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/cgroup"
)

// A backend starts in its cgroup, and killing the instance kills what it
// left behind there: a child that called setsid (standing in for the exec
// backend's app or a worker it spawned) is gone with it.
func TestKillTakesBackendCgroup(t *testing.T) {
	m, err := cgroup.Open("/proc", fmt.Sprintf("wsched-hosttest-%d", os.Getpid()))
	if err != nil {
		t.Skipf("no writable cgroup hierarchy (uid %d): %v", os.Getuid(), err)
	}
	defer func() { _ = m.Close() }()
	g, err := m.New("backend")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	p, err := startProcess(context.Background(), fakeBinary, os.Environ(), log, time.Minute, g)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := g.PIDs()
	if err != nil || !slices.Contains(pids, p.pid) {
		p.kill()
		t.Fatalf("backend %d not in its cgroup %s: %v (%v)", p.pid, g.Dir(), pids, err)
	}
	child := exec.Command("setsid", "sleep", "300")
	if err := child.Start(); err != nil {
		p.kill()
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { _ = child.Wait(); close(reaped) }()
	if err := g.Add(child.Process.Pid); err != nil {
		_ = child.Process.Kill()
		p.kill()
		t.Fatal(err)
	}
	p.kill()
	select {
	case <-reaped:
	case <-time.After(30 * time.Second): // a hang, not a timing assertion
		_ = syscall.Kill(child.Process.Pid, syscall.SIGKILL)
		t.Fatalf("the setsid child %d outlived its backend's instance", child.Process.Pid)
	}
	if _, err := os.Stat(g.Dir()); err == nil {
		t.Errorf("cgroup %s left behind", g.Dir())
	}
}

// The processes in a backend's cgroup count against its lease with those
// it reports.
func TestCgroupPIDsJoinReported(t *testing.T) {
	m, err := cgroup.Open("/proc", fmt.Sprintf("wsched-hosttest-%d", os.Getpid()))
	if err != nil {
		t.Skipf("no writable cgroup hierarchy (uid %d): %v", os.Getuid(), err)
	}
	defer func() { _ = m.Close() }()
	g, err := m.New("pids")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Remove(context.Background()) }()
	child := exec.Command("sleep", "300")
	if err := g.Start(child); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	p := &process{cg: g}
	if got := p.withCgroupPIDs([]int{7}); !slices.Equal(got, []int{7, child.Process.Pid}) {
		t.Errorf("pids %v, want [7 %d]", got, child.Process.Pid)
	}
	if got := (&process{}).withCgroupPIDs([]int{7}); !slices.Equal(got, []int{7}) {
		t.Errorf("without a cgroup: %v", got)
	}
}
