package daemon

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
)

// pidfds counts this process's open pidfds (the in-process daemon's).
func pidfds(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "anon_inode:[pidfd]" {
			n++
		}
	}
	return n
}

// TestReleasedHoldersAreNotWatched: a holder that lives on after its lease
// was released must not keep a descriptor in the daemon for long (the
// watcher keeps a few for a short while: procwatch's idleSet).
func TestReleasedHoldersAreNotWatched(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, nil)
	ctx := context.Background()
	const n = 20
	var holders []int
	for range n {
		sleeper := exec.Command("sleep", "60")
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
		holders = append(holders, sleeper.Process.Pid)
	}
	base := pidfds(t) // os/exec holds a pidfd per child too
	for _, pid := range holders {
		l, err := td.c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 1 << 20, Holder: &api.HolderRequest{PID: pid}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := td.c.Release(ctx, l.ID); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := pidfds(t) - base
		if got <= 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pidfds stay open for %d holders whose leases were released", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
