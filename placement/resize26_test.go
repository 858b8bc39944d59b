package placement

import (
	"context"
	"errors"
	"testing"
	"time"
)

// stored is what the store holds for lease id (zero when nothing).
func (f *fullStore) stored(id string) Lease {
	f.memStore.mu.Lock()
	defer f.memStore.mu.Unlock()
	return f.leases[id]
}

// TestResizeCommittedOutsideTheLoop (issue 26): a resize is committed
// outside the owner loop, as a grant is: while its commit is held by the
// store the engine still answers others, and the resize is answered only
// once the new size is durable.
func TestResizeCommittedOutsideTheLoop(t *testing.T) {
	fs := &fullStore{memStore: *newMemStore()}
	r := newRig(t, gpus(1, 24*GiB), func(_ *rigConfig, o *Options) { o.Store = fs })
	l := r.acquire(req(2 * GiB))
	fs.mu.Lock()
	fs.block = make(chan struct{})
	fs.mu.Unlock()
	done := make(chan error, 1)
	go func() { _, err := r.eng.Resize(context.Background(), l.ID, 3*GiB); done <- err }()
	time.Sleep(20 * time.Millisecond) // the resize's commit is held by the store
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.eng.Ping(ctx); err != nil {
		t.Fatalf("the owner loop does not answer while a resize commits: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("resize answered before its commit: %v", err)
	default:
	}
	fs.mu.Lock()
	close(fs.block)
	fs.block = nil
	fs.mu.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("resize: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("resize did not return")
	}
	if got := fs.stored(l.ID); got.Bytes != 3*GiB || got.MaxBytes != 3*GiB {
		t.Errorf("stored after the answer: %d bytes (max %d), want 3 GiB", got.Bytes, got.MaxBytes)
	}
	if _, err := r.eng.Resize(context.Background(), l.ID, 2*GiB); err != nil {
		t.Fatalf("shrink: %v", err)
	}
	if got := fs.stored(l.ID); got.Bytes != 2*GiB || got.MaxBytes != 3*GiB {
		t.Errorf("stored after the shrink: %d bytes (max %d), want 2 GiB (max 3 GiB)", got.Bytes, got.MaxBytes)
	}
}

// TestResizeGrowthUndoneWhenNotDurable (issue 26): a growth whose commit
// fails is answered with the error and undone: the lease keeps its size in
// the engine and the accounting.
func TestResizeGrowthUndoneWhenNotDurable(t *testing.T) {
	fs := &fullStore{memStore: *newMemStore()}
	r := newRig(t, gpus(1, 24*GiB), func(_ *rigConfig, o *Options) { o.Store = fs })
	l := r.acquire(req(2 * GiB))
	fs.set(true)
	if _, err := r.eng.Resize(context.Background(), l.ID, 5*GiB); !errors.Is(err, errFull) {
		t.Fatalf("resize on a full disk: %v, want %v", err, errFull)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := r.eng.Get(context.Background(), l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Bytes == 2*GiB && r.view().GPUs[0].LeasedBytes == 2*GiB {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the failed commit: %d bytes, %d leased; want 2 GiB", got.Bytes, r.view().GPUs[0].LeasedBytes)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestResizeToSameSizeChangesNothing: a resize to the size a lease has is
// no resize: no max_bytes (which would keep its peak from being learned),
// no commit, no event.
func TestResizeToSameSizeChangesNothing(t *testing.T) {
	fs := &fullStore{memStore: *newMemStore()}
	r := newRig(t, gpus(1, 24*GiB), func(_ *rigConfig, o *Options) { o.Store = fs })
	l := r.acquire(req(2 * GiB))
	events, unsub, err := r.eng.Subscribe(context.Background(), EventResized)
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	got, err := r.eng.Resize(context.Background(), l.ID, 2*GiB)
	if err != nil {
		t.Fatal(err)
	}
	if got.Bytes != 2*GiB || got.MaxBytes != 0 || fs.stored(l.ID).MaxBytes != 0 {
		t.Errorf("after a resize to its own size: %d bytes, max %d (stored max %d); want 2 GiB, never resized", got.Bytes, got.MaxBytes, fs.stored(l.ID).MaxBytes)
	}
	select {
	case ev := <-events:
		t.Errorf("event %s %q for a resize to the same size", ev.Type, ev.Reason)
	default:
	}
}
