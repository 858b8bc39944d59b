package placement

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestObserveAttributesInOneCommit: the processes attributed to leases in a
// reading are added, counted and persisted together, in one commit; an
// attribution to an ended lease is skipped.
func TestObserveAttributesInOneCommit(t *testing.T) {
	gs := &gatedStore{memStore: *newMemStore(), gate: make(chan struct{})}
	close(gs.gate)
	r := newRig(t, gpus(1, 24*GiB), func(_ *rigConfig, o *Options) { o.Store = gs })
	a, b, gone := r.acquire(req(4*GiB)), r.acquire(req(4*GiB)), r.acquire(req(GiB))
	r.release(gone.ID)
	if err := r.eng.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	gs.mu.Lock()
	before := gs.commits
	gs.mu.Unlock()

	_ = r.sim.SetProcess(0, 700, "worker", 3*GiB)
	_ = r.sim.SetProcess(0, 701, "worker", GiB)
	r.observe(Attribution{Lease: a.ID, PID: 700}, Attribution{Lease: b.ID, PID: 701}, Attribution{Lease: gone.ID, PID: 702})

	gs.mu.Lock()
	commits := gs.commits - before
	gs.mu.Unlock()
	if commits != 1 {
		t.Errorf("%d commits for one reading's attributions; want 1", commits)
	}
	for _, c := range []struct {
		id   string
		pid  int
		used int64
	}{{a.ID, 700, 3 * GiB}, {b.ID, 701, GiB}} {
		got, _ := r.eng.Get(context.Background(), c.id)
		gs.memStore.mu.Lock()
		stored := gs.memStore.leases[c.id]
		gs.memStore.mu.Unlock()
		if !slices.Contains(got.PIDs, c.pid) || got.UsedBytes != c.used || !slices.Contains(stored.PIDs, c.pid) {
			t.Errorf("lease %s: pids %v, used %d, stored pids %v; want pid %d counted (%d bytes) and stored",
				c.id, got.PIDs, got.UsedBytes, stored.PIDs, c.pid, c.used)
		}
	}
	if got, _ := r.eng.Get(context.Background(), gone.ID); len(got.PIDs) != 0 {
		t.Errorf("ended lease gained pids %v", got.PIDs)
	}
}

// TestViewReadsWithoutTheLoop: View answers while the owner loop is busy
// (here: blocked on a commit), and a caller sees its own change at once.
func TestViewReadsWithoutTheLoop(t *testing.T) {
	gs := &gatedStore{memStore: *newMemStore(), gate: make(chan struct{})}
	r := newRig(t, gpus(1, 24*GiB), func(_ *rigConfig, o *Options) { o.Store = gs })
	granted := make(chan Lease, 1)
	go func() {
		l, _ := r.eng.Acquire(context.Background(), req(4*GiB))
		granted <- l
	}()
	for r.view().GPUs[0].LeasedBytes != 4*GiB { // decided, not yet durable
		time.Sleep(time.Millisecond)
	}
	renewed := make(chan error, 1)
	go func() {
		_, err := r.eng.Renew(context.Background(), r.view().GPUs[0].Leases[0].ID, time.Minute)
		renewed <- err // the loop waits for the renewal's commit meanwhile
	}()
	time.Sleep(20 * time.Millisecond)
	done := make(chan View, 1)
	go func() { done <- r.eng.View() }()
	select {
	case v := <-done:
		if len(v.GPUs[0].Leases) != 1 {
			t.Errorf("view while the loop is busy: %+v", v.GPUs[0])
		}
	case <-time.After(5 * time.Second):
		t.Fatal("View waited for the owner loop")
	}
	close(gs.gate)
	l := <-granted
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	r.release(l.ID)
	if v := r.view(); v.GPUs[0].LeasedBytes != 0 || len(v.GPUs[0].Leases) != 0 {
		t.Errorf("view right after release: %+v", v.GPUs[0].Account)
	}
}
