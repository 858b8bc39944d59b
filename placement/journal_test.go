package placement

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatedStore is a BatchStore whose commits wait for a gate, counting
// commits and the changes in them.
type gatedStore struct {
	memStore
	gate    chan struct{}
	mu      sync.Mutex
	commits int
	changes int
}

func (g *gatedStore) Apply(cs []Change) error {
	<-g.gate
	g.mu.Lock()
	g.commits++
	g.changes += len(cs)
	g.mu.Unlock()
	g.apply(cs)
	return nil
}

func TestGroupCommit(t *testing.T) {
	gs := &gatedStore{memStore: *newMemStore(), gate: make(chan struct{})}
	r := newRig(t, gpus(2, 80*GiB), func(_ *rigConfig, o *Options) { o.Store = gs })
	const n = 20
	results := make(chan result, n)
	for i := 0; i < n; i++ {
		go func() {
			l, err := r.eng.Acquire(context.Background(), req(GiB))
			results <- result{lease: l, err: err}
		}()
	}
	// Every decision is taken, but nobody is answered before a commit.
	for {
		if v := r.view(); v.GPUs[0].LeasedBytes+v.GPUs[1].LeasedBytes == n*GiB {
			break
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case res := <-results:
		t.Fatalf("answered before the lease was durable: %+v", res)
	case <-time.After(50 * time.Millisecond):
	}
	close(gs.gate)
	for i := 0; i < n; i++ {
		if res := <-results; res.err != nil {
			t.Fatal(res.err)
		}
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.changes != n || gs.commits >= n || gs.len() != n {
		t.Errorf("%d changes in %d commits, %d stored; want %d changes in fewer commits", gs.changes, gs.commits, gs.len(), n)
	}
	t.Logf("%d grants persisted in %d commits", gs.changes, gs.commits)
}

// batchLog is a BatchStore that records each commit's changes.
type batchLog struct {
	memStore
	mu      sync.Mutex
	batches [][]Change
}

func (b *batchLog) Apply(cs []Change) error {
	b.mu.Lock()
	b.batches = append(b.batches, cs)
	b.mu.Unlock()
	return nil
}

// TestReleaseAndGrantShareCommit: the release of a lease and the grant of
// the waiter it lets in are made durable in one commit.
func TestReleaseAndGrantShareCommit(t *testing.T) {
	bl := &batchLog{memStore: *newMemStore()}
	r := newRig(t, gpus(1, 24*GiB), func(_ *rigConfig, o *Options) { o.Store = bl })
	holder := r.acquire(req(24 * GiB))
	ch := r.acquireAsync(req(24*GiB, wait(time.Minute)))
	for len(r.view().Queue) != 1 {
		time.Sleep(time.Millisecond)
	}
	r.release(holder.ID)
	res := <-ch
	if res.err != nil {
		t.Fatal(res.err)
	}
	bl.mu.Lock()
	defer bl.mu.Unlock()
	for _, b := range bl.batches {
		var del, put bool
		for _, c := range b {
			del = del || c.Delete == holder.ID
			put = put || (c.Put != nil && c.Put.ID == res.lease.ID)
		}
		if del || put {
			if !del || !put {
				t.Errorf("release and grant in different commits: %+v", bl.batches)
			}
			return
		}
	}
	t.Errorf("neither commit found: %+v", bl.batches)
}

// failingStore is a BatchStore whose commits fail while fail is set.
type failingStore struct {
	memStore
	fail atomic.Bool
}

var errDisk = errors.New("disk on fire")

func (f *failingStore) Apply(cs []Change) error {
	if f.fail.Load() {
		return errDisk
	}
	f.apply(cs)
	return nil
}

// TestReleaseCommittedWithoutGrant: a release's deletion that no grant
// follows is committed on its own (the linger timer), not left queued.
func TestReleaseCommittedWithoutGrant(t *testing.T) {
	fs := &failingStore{memStore: *newMemStore()}
	r := newRig(t, gpus(1, 24*GiB), func(_ *rigConfig, o *Options) { o.Store = fs })
	l := r.acquire(req(GiB))
	if fs.len() != 1 {
		t.Fatalf("granted lease not stored before the answer (%d stored)", fs.len())
	}
	r.release(l.ID)
	for deadline := time.Now().Add(5 * time.Second); fs.len() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a release's deletion was never committed")
		}
	}
}

// TestFailedCommitTakesGrantBack: a grant whose commit fails is answered
// with the error and taken back; a renewal whose commit fails is undone.
func TestFailedCommitTakesGrantBack(t *testing.T) {
	fs := &failingStore{memStore: *newMemStore()}
	r := newRig(t, gpus(1, 24*GiB), func(_ *rigConfig, o *Options) { o.Store = fs })
	kept := r.acquire(req(GiB, ttl(time.Minute)))
	fs.fail.Store(true)
	if _, err := r.eng.Acquire(context.Background(), req(2*GiB)); !errors.Is(err, errDisk) {
		t.Fatalf("grant with a failing store: %v, want %v", err, errDisk)
	}
	if _, err := r.eng.Renew(context.Background(), kept.ID, time.Hour); !errors.Is(err, errDisk) {
		t.Fatalf("renewal with a failing store: %v, want %v", err, errDisk)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		v := r.view()
		if len(v.GPUs[0].Leases) == 1 && v.GPUs[0].Leases[0].TTL == time.Minute {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("failed grant or renewal not undone: %+v", v.GPUs[0].Leases)
		}
	}
	fs.fail.Store(false)
	if _, err := r.eng.Renew(context.Background(), kept.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
}
