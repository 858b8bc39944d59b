package placement

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// stepClock is a clock the test moves.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stepClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (r *rig) report(id string, pid int, used int64) {
	r.t.Helper()
	allow := func(Lease) error { return nil }
	if _, err := r.eng.ReportUsageAs(context.Background(), id, Usage{PID: pid, UsedBytes: used, LimitBytes: used}, allow); err != nil {
		r.t.Fatalf("report usage of %s: %v", id, err)
	}
}

// TestBorrowersAskedBackThenStopped: two holders borrow past their leases
// (reported by the preload cap, seen as used memory in the reading); a
// request that does not fit because of it asks the lowest-priority borrower
// with enough borrowed memory back, with a deadline, and that holder is
// stopped once the deadline passes while it still borrows. When it gives
// the memory back, the request is granted.
func TestBorrowersAskedBackThenStopped(t *testing.T) {
	clock := &stepClock{t: time.Now()}
	signals := make(chan int, 8)
	r := newRig(t, gpus(1, 8*GiB), func(_ *rigConfig, o *Options) {
		o.Now, o.BorrowGrace = clock.now, 10*time.Second
		o.Signal = func(pid int) { signals <- pid }
	})
	events, cancel, err := r.eng.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	a := r.acquire(req(2*GiB, prio(Low), holder(100)))
	b := r.acquire(req(2*GiB, holder(200)))
	_ = r.sim.SetProcess(0, 100, "a", 4*GiB) // A borrows 2 GiB
	_ = r.sim.SetProcess(0, 200, "b", 3*GiB) // B borrows 1 GiB
	r.observe()
	r.report(a.ID, 100, 4*GiB)
	r.report(b.ID, 200, 3*GiB)

	got := r.acquireAsync(req(3*GiB, wait(time.Hour))) // 1 GiB free: needs 2 GiB of the borrowed 3
	var ask Event
	for ask.Type != EventReclaim {
		select {
		case ask = <-events:
		case <-time.After(10 * time.Second): // a hang, not a timing assertion
			t.Fatal("no reclaim event")
		}
	}
	if ask.Lease.ID != a.ID || !strings.Contains(ask.Reason, "borrowing 2.00 GiB over its 2.00 GiB lease") || !strings.Contains(ask.Reason, "give it back by") {
		t.Fatalf("reclaim %s %q, want A %s (low priority, enough borrowed)", ask.Lease.ID, ask.Reason, a.ID)
	}
	r.observe() // before the deadline: nobody is stopped
	select {
	case pid := <-signals:
		t.Fatalf("pid %d stopped before its deadline", pid)
	default:
	}
	clock.add(11 * time.Second)
	r.observe()
	select {
	case pid := <-signals:
		if pid != 100 {
			t.Fatalf("stopped pid %d, want A's holder 100", pid)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A's holder was not stopped after its deadline")
	}
	_ = r.sim.SetProcess(0, 100, "a", 2*GiB) // A's memory is back (its holder gave it up)
	r.report(a.ID, 100, 2*GiB)
	r.observe()
	select {
	case res := <-got:
		if res.err != nil || res.lease.State != StateGranted {
			t.Fatalf("the waiting request: %+v %v, want granted", res.lease, res.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting request was not granted once the borrowed memory was back")
	}
	select {
	case pid := <-signals:
		t.Errorf("pid %d stopped; only A's holder was due", pid)
	default:
	}
}

// A borrower asked back is not stopped when it gives the memory back
// before its deadline, nor when the request it was asked for stops waiting.
func TestBorrowerNotStopped(t *testing.T) {
	for _, leave := range []string{"gives back", "waiter leaves"} {
		t.Run(leave, func(t *testing.T) {
			clock := &stepClock{t: time.Now()}
			signals := make(chan int, 8)
			r := newRig(t, gpus(1, 8*GiB), func(_ *rigConfig, o *Options) {
				o.Now, o.BorrowGrace = clock.now, 10*time.Second
				o.Signal = func(pid int) { signals <- pid }
			})
			events, cancel, err := r.eng.Subscribe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer cancel()
			a := r.acquire(req(2*GiB, holder(100)))
			_ = r.sim.SetProcess(0, 100, "a", 6*GiB)
			r.observe()
			r.report(a.ID, 100, 6*GiB)
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			got := make(chan error, 1)
			go func() { _, err := r.eng.Acquire(ctx, req(4*GiB, wait(time.Hour))); got <- err }()
			if ids := reclaimEvents(t, events, 1); ids[0] != a.ID {
				t.Fatalf("asked back %v, want A %s", ids, a.ID)
			}
			if leave == "gives back" {
				r.report(a.ID, 100, 2*GiB) // the cap saw it free: at its lease again
			} else {
				stop()
				<-got
			}
			clock.add(time.Minute)
			r.observe()
			select {
			case pid := <-signals:
				t.Fatalf("pid %d stopped after it %s", pid, leave)
			default:
			}
		})
	}
}
