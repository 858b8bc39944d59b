package host

import (
	"context"
	"errors"
	"sync"
	"testing"

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
