package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
)

// TestLeaseSurvivesDaemonStop (issue 14, item 6): a daemon stopped with
// SIGSTOP for longer than a lease's TTL does not expire the lease of its
// live holder when it resumes: the TTL gets the stalled time back, and the
// lease still expires once that TTL runs out unrenewed.
func TestLeaseSurvivesDaemonStop(t *testing.T) {
	e := newE2E(t)
	daemon := e.serve()
	c := e.client()
	defer c.Close()
	holder := sleeper(t)
	ctx := context.Background()
	l, err := c.Acquire(ctx, api.LeaseRequest{MemoryBytes: GiB, TTLSeconds: 2, Holder: &api.HolderRequest{PID: holder.Process.Pid}})
	if err != nil {
		t.Fatal(err)
	}
	if err := daemon.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(7 * time.Second) // past the TTL, and a stall by any measure
	if err := daemon.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	got, err := c.Lease(ctx, l.ID)
	if err != nil || got.State != "granted" {
		t.Fatalf("lease of a live holder after the daemon was stopped past its TTL: %+v %v", got, err)
	}
	waitFor(t, 20*time.Second, "the lease to expire unrenewed after the stall", func() bool {
		got, _ := c.Lease(ctx, l.ID)
		return got.State == "expired"
	})
}
