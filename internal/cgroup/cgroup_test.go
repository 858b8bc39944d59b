package cgroup_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsched/wsched/internal/cgroup"
)

// managers opens a manager in each writable hierarchy of this machine (v2
// and v1 are both tested where both are mounted); it skips the test when
// none is writable (not root).
func managers(t *testing.T) []*cgroup.Manager {
	t.Helper()
	hs, err := cgroup.Hierarchies("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []*cgroup.Manager
	for _, h := range hs {
		m, err := cgroup.OpenIn(h, fmt.Sprintf("wsched-cgtest-%d", os.Getpid()))
		if err != nil {
			t.Logf("%s %s: %v", h.Version, h.Mount, err)
			continue
		}
		t.Cleanup(func() {
			if err := m.Close(); err != nil {
				t.Error(err)
			}
		})
		out = append(out, m)
	}
	if len(out) == 0 {
		t.Skipf("no writable cgroup hierarchy here (uid %d): %+v", os.Getuid(), hs)
	}
	return out
}

// A holder's child that leaves its session (setsid) and outlives the
// holder is still in the holder's cgroup, and killing the cgroup ends it.
func TestKillTakesSetsidChildren(t *testing.T) {
	for _, m := range managers(t) {
		t.Run(string(m.Hierarchy().Version)+"-"+m.Hierarchy().Controller, func(t *testing.T) {
			g, err := m.New("holder")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			t.Cleanup(func() { _ = g.Remove(context.Background()) })
			// The child forks at once: Start must have it in the group
			// before its first instruction (v2: CLONE_INTO_CGROUP; v1: the
			// forking thread joins the group).
			cmd := exec.Command("sh", "-c", `setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!`)
			var stdout strings.Builder
			cmd.Stdout = &stdout
			if err := g.Start(cmd); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("sh: %v", err)
			}
			out := []byte(stdout.String())
			if slices.Contains(mustPIDs(t, g), os.Getpid()) {
				t.Errorf("a thread of the test process is still in %s after Start", g.Dir())
			}
			orphan := mustAtoi(t, out)
			defer syscall.Kill(orphan, syscall.SIGKILL)
			if pids := mustPIDs(t, g); !slices.Contains(pids, orphan) {
				t.Fatalf("the setsid child %d is not in %s: %v", orphan, g.Dir(), pids)
			}
			waitSetsid(ctx, t, orphan)
			if err := g.Remove(ctx); err != nil {
				t.Fatal(err)
			}
			waitGone(ctx, t, orphan)
			if _, err := os.Stat(g.Dir()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s is still there: %v", g.Dir(), err)
			}
		})
	}
}

func TestAddThenPIDs(t *testing.T) {
	for _, m := range managers(t) {
		g, err := m.New("add")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Remove(context.Background()) })
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := g.Add(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		if pids := mustPIDs(t, g); !slices.Equal(pids, []int{cmd.Process.Pid}) {
			t.Errorf("%s: pids %v, want [%d]", m.Hierarchy().Version, pids, cmd.Process.Pid)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := g.Remove(ctx); err != nil {
			t.Error(err)
		}
		cancel()
		if err := cmd.Wait(); err == nil {
			t.Error("sleep exited normally; want killed")
		}
	}
}

func TestNewRefusesPaths(t *testing.T) {
	for _, m := range managers(t) {
		for _, name := range []string{"", "..", "a/b"} {
			if _, err := m.New(name); err == nil {
				t.Errorf("New(%q) made a group", name)
			}
		}
	}
}

func TestHierarchiesFromFiles(t *testing.T) {
	root := t.TempDir()
	_ = os.MkdirAll(filepath.Join(root, "self"), 0o755)
	mountinfo := "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n" +
		"37 31 0:34 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n" +
		"39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n" +
		"40 31 0:37 / /sys/fs/cgroup/unified\\040x rw - cgroup2 cgroup2 rw\n"
	own := "8:pids:/a\n6:freezer:/b\n0::/system.slice/wsched.service\n"
	_ = os.WriteFile(filepath.Join(root, "self/mountinfo"), []byte(mountinfo), 0o644)
	_ = os.WriteFile(filepath.Join(root, "self/cgroup"), []byte(own), 0o644)
	hs, err := cgroup.Hierarchies(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []cgroup.Hierarchy{
		{Version: cgroup.V2, Mount: "/sys/fs/cgroup/unified x", Own: "/system.slice/wsched.service"},
		{Version: cgroup.V1, Mount: "/sys/fs/cgroup/pids", Own: "/a", Controller: "pids"},
		{Version: cgroup.V1, Mount: "/sys/fs/cgroup/freezer", Own: "/b", Controller: "freezer"},
	}
	if !slices.Equal(hs, want) {
		t.Errorf("hierarchies %+v, want %+v", hs, want)
	}
}

func mustPIDs(t *testing.T, g *cgroup.Group) []int {
	t.Helper()
	pids, err := g.PIDs()
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

func mustAtoi(t *testing.T, b []byte) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid %q: %v", b, err)
	}
	return n
}

// waitSetsid waits until pid leads a session of its own (setsid ran).
func waitSetsid(ctx context.Context, t *testing.T, pid int) {
	t.Helper()
	for {
		sid, err := unix.Getsid(pid)
		if err == nil && sid == pid {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the child %d did not leave the session (sid %d, %v)", pid, sid, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitGone waits until pid has exited (a zombie counts: its parent is not
// this test).
func waitGone(ctx context.Context, t *testing.T, pid int) {
	t.Helper()
	for {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if i := strings.LastIndexByte(string(data), ')'); i > 0 && len(data) > i+2 && data[i+2] == 'Z' {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pid %d still runs after its cgroup was killed", pid)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A group left by a holder killed outright (named for a PID that is gone)
// is swept, with what still runs in it; a live one is kept.
func TestSweepStale(t *testing.T) {
	for _, m := range managers(t) {
		dead := exec.Command("true")
		if err := dead.Run(); err != nil {
			t.Fatal(err)
		}
		h := m.Hierarchy()
		stale, err := cgroup.OpenIn(h, fmt.Sprintf("wsched-sweeptest-%d", dead.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		g, err := stale.New("child")
		if err != nil {
			t.Fatal(err)
		}
		left := exec.Command("sleep", "300")
		if err := g.Start(left); err != nil {
			t.Fatal(err)
		}
		reaped := make(chan struct{})
		go func() { _ = left.Wait(); close(reaped) }()
		live, err := cgroup.OpenIn(h, fmt.Sprintf("wsched-sweeptest-%d", os.Getpid()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n := m.SweepStale(ctx, "/proc", "wsched-sweeptest-")
		cancel()
		if n != 1 {
			t.Errorf("%s: swept %d groups, want 1", h.Version, n)
		}
		select {
		case <-reaped:
		case <-time.After(30 * time.Second): // a hang, not a timing assertion
			_ = left.Process.Kill()
			t.Fatalf("%s: the process left in the stale group still runs", h.Version)
		}
		if _, err := os.Stat(stale.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: stale group %s kept", h.Version, stale.Dir())
		}
		if err := live.Close(); err != nil {
			t.Errorf("%s: the live group: %v", h.Version, err)
		}
	}
}
