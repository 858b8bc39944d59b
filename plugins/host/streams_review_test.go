package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/placement"
)

// lostResizes is the engine, except that the next resize it is told to
// lose takes effect and is then answered with an error, as one whose
// caller's ctx ended while the change was committed (Engine.call waits for
// the commit with the caller's ctx; the change stays).
type lostResizes struct {
	*placement.Engine
	mu     sync.Mutex
	lose   int
	cancel context.CancelFunc // called as an answer is lost: the caller gave up
}

func (l *lostResizes) Resize(ctx context.Context, id string, bytes int64) (placement.Lease, error) {
	if err := ctx.Err(); err != nil { // as the engine answers when its loop is busy (else it picks at random)
		return placement.Lease{}, err
	}
	lease, err := l.Engine.Resize(ctx, id, bytes)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.lose > 0 {
		l.lose--
		l.cancel()
		return placement.Lease{}, context.Canceled
	}
	return lease, err
}

// TestStreamJoinLostAnswerLeaksNoGrowth: a join whose resize took effect
// in the engine but whose answer was lost (the caller's ctx cancelled
// during the commit) must not leave the instance's lease grown: the caller
// gets the cancellation and the lease is back at its first stream's size.
func TestStreamJoinLostAnswerLeaksNoGrowth(t *testing.T) {
	var lr *lostResizes
	r := newRig(t, []int64{24 * GiB}, func(_ *config.Backends, o *Options) {
		lr = &lostResizes{Engine: o.Leases.(*placement.Engine)}
		o.Leases = lr
	})
	spec := r.streamSpec("model.bin", 4)
	a, relA := r.acquire(spec)
	defer relA()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	lr.mu.Lock()
	lr.lose, lr.cancel = 1, cancel
	lr.mu.Unlock()
	if _, _, err := r.h.Acquire(ctx, spec); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire whose ctx ended while joining: %v, want context.Canceled", err)
	}
	if l := r.lease(a.Lease().ID); l.Bytes != 2*GiB {
		t.Errorf("first instance's lease %d bytes with one stream, want 2 GiB (a lost resize's growth left behind)", l.Bytes)
	}
	if n := a.Streams(); n != 1 {
		t.Errorf("%d streams on the instance, want 1", n)
	}
}

// countedResizes is the engine, counting the resizes asked of it.
type countedResizes struct {
	*placement.Engine
	mu sync.Mutex
	n  int
}

func (c *countedResizes) Resize(ctx context.Context, id string, bytes int64) (placement.Lease, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.Engine.Resize(ctx, id, bytes)
}

func (c *countedResizes) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestStreamWaiterDoesNotSpin: a caller waiting for room to join (one more
// stream fits nowhere) tries again when something changes and every
// joinRetry, not in a loop: its own failed try must not wake it again.
func TestStreamWaiterDoesNotSpin(t *testing.T) {
	var cr *countedResizes
	r := newRig(t, []int64{4 * GiB, 4 * GiB}, func(_ *config.Backends, o *Options) {
		cr = &countedResizes{Engine: o.Leases.(*placement.Engine)}
		o.Leases = cr
	})
	spec := r.streamSpec("model.bin", 4)
	spec.Wait = time.Minute
	a, relA := r.acquire(spec)
	defer relA()
	gpu := a.Lease().GPUIndex
	r.outside(gpu, 2*GiB-256*MiB) // 256 MiB left there: not a stream
	r.outside(1-gpu, 3*GiB)       // 1 GiB left: not a whole instance
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, _, err := r.h.Acquire(ctx, spec); done <- err }()
	time.Sleep(2 * joinRetry) // waiting: a few tries at most
	n := cr.count()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("waiting Acquire: %v, want context.Canceled", err)
	}
	t.Logf("%d resizes asked in %s of waiting", n, 2*joinRetry)
	if n > 10 {
		t.Errorf("%d resizes asked while one caller waited %s for room (every %s): it spins", n, 2*joinRetry, joinRetry)
	}
}

// TestSharedInstanceCappedForItsStreams: the allocation cap a backend is
// started under (the preload or MPS tier's, fixed for the process's life)
// covers every stream its instance may serve, not only the first: a shared
// instance's lease grows by Resize after the process started, and a cap at
// the first stream's size would refuse the second stream's state. A
// one-stream instance is capped at its lease.
func TestSharedInstanceCappedForItsStreams(t *testing.T) {
	var mu sync.Mutex
	capped := map[string]int64{} // model path → bytes the cap was set from
	r := newRig(t, []int64{24 * GiB}, func(_ *config.Backends, o *Options) {
		o.Enforce = func(l placement.Lease) map[string]string {
			mu.Lock()
			defer mu.Unlock()
			capped[l.Labels[LabelModel]] = l.Bytes
			return map[string]string{"WSCHED_TEST_CAP": fmt.Sprint(l.Bytes)}
		}
	})
	shared := r.streamSpec("shared.bin", 4)
	one := r.streamSpec("one.bin", 1)
	_, relS := r.acquire(shared)
	defer relS()
	_, relO := r.acquire(one)
	defer relO()
	mu.Lock()
	defer mu.Unlock()
	if got, want := capped[shared.Load.ModelPath], 2*GiB+3*512*MiB; got != want {
		t.Errorf("shared instance (4 streams) capped at %d bytes, want %d (the first stream and three more)", got, want)
	}
	if got := capped[one.Load.ModelPath]; got != 2*GiB {
		t.Errorf("one-stream instance capped at %d bytes, want its lease's 2 GiB", got)
	}
}
