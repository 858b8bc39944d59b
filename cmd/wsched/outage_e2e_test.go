package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/testshared"
)

// waitFor polls cond every 20 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startRun starts `wsched run ARGS…` and returns it with its stderr and the
// lease ID it printed.
func (e *e2e) startRun(args ...string) (*testshared.SyncBuffer, func() error, string) {
	e.t.Helper()
	cmd := e.wsched(append([]string{"run"}, args...)...)
	var stderr testshared.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	var id string
	waitFor(e.t, 10*time.Second, "the run's lease", func() bool {
		m := regexp.MustCompile(`lease (l-[0-9a-f]+) granted`).FindStringSubmatch(stderr.String())
		if m != nil {
			id = m[1]
		}
		return m != nil
	})
	wait := func() error {
		select {
		case err := <-done:
			done <- err
			return err
		case <-time.After(30 * time.Second):
			e.t.Fatalf("wsched run did not end; stderr:\n%s", stderr.String())
			return nil
		}
	}
	return &stderr, wait, id
}

// TestRunKeepsLeaseThroughOutage (issue 14, item 6): the daemon is killed
// and stays down longer than the lease's TTL; the restarted daemon restores
// the lease of the live holder (wsched run) with its TTL started again, the
// run goes on renewing it, and says each change once.
func TestRunKeepsLeaseThroughOutage(t *testing.T) {
	e := newE2E(t)
	daemon := e.serve()
	stderr, wait, id := e.startRun("--memory", "4GiB", "--ttl", "1s", "--", "sleep", "4")
	_ = daemon.Process.Signal(syscall.SIGKILL)
	_ = daemon.Wait()
	time.Sleep(1500 * time.Millisecond) // longer than the TTL
	e.serve()
	c := e.client()
	defer c.Close()
	if l, err := c.Lease(context.Background(), id); err != nil || l.State != "granted" {
		t.Fatalf("lease after the outage: %+v %v", l, err)
	}
	waitFor(t, 10*time.Second, "the run to notice the daemon back, with its child registered", func() bool {
		l, _ := c.Lease(context.Background(), id)
		return strings.Contains(stderr.String(), "the daemon answers again; lease "+id+" kept") && len(l.PIDs) == 1
	})
	if err := wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if n := strings.Count(stderr.String(), "; keeping lease "+id+" and retrying"); n != 1 {
		t.Errorf("said the daemon was unreachable %d times, want once:\n%s", n, stderr.String())
	}
	if l, err := c.Lease(context.Background(), id); err != nil || l.State != "released" {
		t.Errorf("lease after the run: %+v %v", l, err)
	}
}

// TestRunReacquiresLostLease (issue 14, item 6): a daemon that comes back
// without the lease (its state gone) makes the run ask for the same size
// again on the same GPU and register its child with the new lease.
func TestRunReacquiresLostLease(t *testing.T) {
	e := newE2E(t)
	daemon := e.serve()
	stderr, wait, id := e.startRun("--memory", "3GiB", "--ttl", "1s", "--", "sleep", "4")
	_ = daemon.Process.Signal(syscall.SIGKILL)
	_ = daemon.Wait()
	if err := os.RemoveAll(filepath.Join(e.dir, "state")); err != nil {
		t.Fatal(err)
	}
	e.serve()
	c := e.client()
	defer c.Close()
	var now api.Lease
	waitFor(t, 10*time.Second, "the re-acquired lease", func() bool {
		ls, _ := c.Leases(context.Background())
		for _, l := range ls {
			if l.ID != id && l.MemoryBytes == 3*GiB && len(l.PIDs) == 1 {
				now = l
				return true
			}
		}
		return false
	})
	if !strings.Contains(stderr.String(), "lease "+id+" re-acquired as "+now.ID+", 3221225472 bytes on the same GPU") {
		t.Errorf("stderr does not say the lease was re-acquired:\n%s", stderr.String())
	}
	if err := wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if l, err := c.Lease(context.Background(), now.ID); err != nil || l.State != "released" {
		t.Errorf("new lease after the run: %+v %v", l, err)
	}
}

// TestRunWaitSurvivesRestart (issue 14, item 7): a `run --wait` queued
// behind a full GPU when the daemon restarts gracefully asks again with its
// priority once the daemon is back, and runs when the memory is freed.
func TestRunWaitSurvivesRestart(t *testing.T) {
	_, stderr := waitThroughStop(t, terminateDaemon, "run", "--memory", "8GiB", "--wait", "60s", "--priority", "high", "--", "true")
	if n := strings.Count(stderr, "asking again, priority high"); n != 1 {
		t.Errorf("said 'asking again' %d times, want once:\n%s", n, stderr)
	}
}
