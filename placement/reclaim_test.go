package placement

import (
	"context"
	"errors"
	"testing"
	"time"
)

// reclaimEvents collects the EventReclaim lease IDs of a subscription until
// n have arrived.
func reclaimEvents(t *testing.T, ch <-chan Event, n int) []string {
	t.Helper()
	var ids []string
	deadline := time.After(10 * time.Second) // a hang, not a timing assertion
	for len(ids) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("event stream ended")
			}
			if ev.Type == EventReclaim {
				ids = append(ids, ev.Lease.ID)
			}
		case <-deadline:
			t.Fatalf("reclaim events: got %v, want %d", ids, n)
		}
	}
	return ids
}

func (r *rig) setReclaimable(id string, on bool) {
	r.t.Helper()
	if _, err := r.eng.SetReclaimable(context.Background(), id, on); err != nil {
		r.t.Fatalf("set reclaimable %s: %v", id, err)
	}
}

// TestReclaimLeastRecentlyMarked: a request that does not fit asks back just
// enough reclaimable leases, least recently marked first; it waits for them
// even without a wait of its own and is granted when they are released.
func TestReclaimLeastRecentlyMarked(t *testing.T) {
	r := newRig(t, gpus(1, 8*GiB))
	events, cancel, err := r.eng.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	a, b := r.acquire(req(3*GiB)), r.acquire(req(3*GiB))
	r.setReclaimable(b.ID, true) // B idle first: least recently marked
	r.setReclaimable(a.ID, true)

	got := r.acquireAsync(req(4 * GiB)) // 2 GiB free: needs one of them, no wait given
	if ids := reclaimEvents(t, events, 1); ids[0] != b.ID {
		t.Fatalf("asked back %v, want B %s", ids, b.ID)
	}
	select {
	case res := <-got:
		t.Fatalf("granted before B was released: %+v, %v", res.lease, res.err)
	default:
	}
	r.release(b.ID)
	res := <-got
	if res.err != nil || res.lease.State != StateGranted {
		t.Fatalf("after the reclaim: %+v, %v; want granted", res.lease, res.err)
	}
	if l, err := r.eng.Get(context.Background(), a.ID); err != nil || l.State != StateGranted {
		t.Errorf("A: %+v, %v; want it kept", l, err)
	}
}

// TestReclaimNothingToReclaim: without reclaimable memory a request that
// asked not to wait fails at once, as before; a lease unmarked after being
// asked back is no longer counted on.
func TestReclaimNothingToReclaim(t *testing.T) {
	r := newRig(t, gpus(1, 8*GiB))
	events, cancel, err := r.eng.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	a := r.acquire(req(6 * GiB))
	if _, err := r.eng.Acquire(context.Background(), req(4*GiB)); !errors.Is(err, ErrNoFit) {
		t.Fatalf("nothing reclaimable: %v, want ErrNoFit", err)
	}

	r.setReclaimable(a.ID, true)
	got := r.acquireAsync(req(4*GiB, wait(time.Hour)))
	reclaimEvents(t, events, 1)
	r.setReclaimable(a.ID, false) // A was taken again before it could go
	if l, err := r.eng.Get(context.Background(), a.ID); err != nil || l.Reclaimable {
		t.Fatalf("A: %+v, %v; want not reclaimable", l, err)
	}
	r.setReclaimable(a.ID, true) // idle again: asked back again
	reclaimEvents(t, events, 1)
	r.release(a.ID)
	if res := <-got; res.err != nil {
		t.Fatalf("after A's release: %v", res.err)
	}
}

// TestReclaimPicksCheapestGPU: the GPU where the fewest bytes must be given
// back wins; a pinned request only looks at its GPU.
func TestReclaimPicksCheapestGPU(t *testing.T) {
	r := newRig(t, gpus(2, 8*GiB))
	events, cancel, err := r.eng.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	big := r.acquire(req(7*GiB, pin("cuda:0")))
	small := r.acquire(req(5*GiB, pin("cuda:1")))
	r.setReclaimable(big.ID, true)
	r.setReclaimable(small.ID, true)

	got := r.acquireAsync(req(4 * GiB))
	if ids := reclaimEvents(t, events, 1); ids[0] != small.ID {
		t.Fatalf("asked back %v, want the 5 GiB lease %s (GPU 1 needs less back)", ids, small.ID)
	}
	r.release(small.ID)
	if res := <-got; res.err != nil || res.lease.GPUIndex != 1 {
		t.Fatalf("granted %+v, %v; want GPU 1", res.lease, res.err)
	}

	pinned := r.acquireAsync(req(4*GiB, pin("cuda:0")))
	if ids := reclaimEvents(t, events, 1); ids[0] != big.ID {
		t.Fatalf("pinned to GPU 0: asked back %v, want %s", ids, big.ID)
	}
	r.release(big.ID)
	if res := <-pinned; res.err != nil || res.lease.GPUIndex != 0 {
		t.Fatalf("pinned: %+v, %v; want GPU 0", res.lease, res.err)
	}
}
