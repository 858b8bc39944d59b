package placement

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fullStore fails every commit that stores a lease while full is set, as a
// full disk does (the store keeps room for deletions), and records what it
// holds.
type fullStore struct {
	memStore
	mu   sync.Mutex
	full bool
	// block, when set, holds a commit until it is closed.
	block chan struct{}
}

var errFull = errors.New("no space left on device")

func (f *fullStore) Apply(cs []Change) error {
	f.mu.Lock()
	full, block := f.full, f.block
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	for _, c := range cs {
		if c.Put != nil && full {
			return errFull
		}
	}
	f.apply(cs)
	return nil
}

func (f *fullStore) set(full bool) { f.mu.Lock(); f.full = full; f.mu.Unlock() }

func (f *fullStore) has(id string) bool {
	f.memStore.mu.Lock()
	defer f.memStore.mu.Unlock()
	_, ok := f.leases[id]
	return ok
}

// TestReleaseWrittenWhenGrantsCannotBe (issue 25 item 6): on a full disk a
// release that shares its commit with a grant is still written (the grant
// fails and is taken back), and the release is answered once it is.
func TestReleaseWrittenWhenGrantsCannotBe(t *testing.T) {
	fs := &fullStore{memStore: *newMemStore()}
	r := newRig(t, gpus(1, 24*GiB), func(_ *rigConfig, o *Options) { o.Store = fs })
	held := r.acquire(req(20 * GiB))
	fs.set(true)
	waiting := make(chan error, 1)
	go func() { _, err := r.eng.Acquire(context.Background(), req(8*GiB, wait(5*time.Second))); waiting <- err }()
	time.Sleep(20 * time.Millisecond) // queued behind the held lease
	if _, err := r.eng.Release(context.Background(), held.ID, "done"); err != nil {
		t.Fatalf("release on a full disk: %v", err)
	}
	if fs.has(held.ID) {
		t.Fatal("the release was answered before its deletion was written")
	}
	if err := <-waiting; !errors.Is(err, errFull) {
		t.Fatalf("grant on a full disk: %v, want %v", err, errFull)
	}
	if v := r.view(); len(v.GPUs[0].Leases) != 0 {
		t.Errorf("leases after the failed grant: %+v, want none", v.GPUs[0].Leases)
	}
}

// TestFailedDeletionRetried (issue 25 item 6): a deletion whose commit
// fails is kept and written once the store works again, with no other
// commit to carry it.
func TestFailedDeletionRetried(t *testing.T) {
	fs := &failingStore{memStore: *newMemStore()}
	r := newRig(t, gpus(1, 24*GiB), func(_ *rigConfig, o *Options) { o.Store = fs })
	l := r.acquire(req(GiB))
	fs.fail.Store(true)
	if _, err := r.eng.Release(context.Background(), l.ID, "done"); !errors.Is(err, errDisk) {
		t.Fatalf("release with a failing store: %v, want %v", err, errDisk)
	}
	time.Sleep(30 * time.Millisecond) // a retry or two fail
	fs.fail.Store(false)
	for deadline := time.Now().Add(5 * time.Second); fs.len() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the failed deletion was never written")
		}
	}
}

// TestCancelledGrantTakenBack (issue 25 item 13): a caller that goes away
// while its grant is being committed gets an error, and the lease is
// deleted again, durably, before that error is returned: no lease is kept
// that its caller was told had failed.
func TestCancelledGrantTakenBack(t *testing.T) {
	fs := &fullStore{memStore: *newMemStore(), block: make(chan struct{})}
	r := newRig(t, gpus(1, 24*GiB), func(_ *rigConfig, o *Options) { o.Store = fs })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := r.eng.Acquire(ctx, req(GiB)); done <- err }()
	time.Sleep(20 * time.Millisecond) // the commit is under way, held by the store
	cancel()
	time.Sleep(20 * time.Millisecond)
	fs.mu.Lock()
	close(fs.block)
	fs.block = nil
	fs.mu.Unlock()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return")
	}
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("Acquire: %v, want ErrCancelled", err)
	}
	if n := fs.len(); n != 0 {
		t.Errorf("%d leases stored after the caller was told its grant failed", n)
	}
}
