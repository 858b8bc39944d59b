package placement

import (
	"context"
	"sync"
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
	for _, c := range cs {
		if c.Put != nil {
			_ = g.memStore.PutLease(*c.Put)
		} else {
			_ = g.memStore.DeleteLease(c.Delete)
		}
	}
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
