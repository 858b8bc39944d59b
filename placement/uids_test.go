package placement

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

func uid(n int) func(*Request)       { return func(r *Request) { r.Holder.UID = n } }
func limits(l Limits) func(*Request) { return func(r *Request) { r.Limits = l } }

// uidUse returns uid's row of the view (zero when it has none).
func (r *rig) uidUse(n int) UIDUse {
	for _, u := range r.view().UIDs {
		if u.UID == n {
			return u
		}
	}
	return UIDUse{UID: n}
}

// TestReclaimForStarvingHead (issue 23 item 4): a request past the backfill
// window holds memory on its GPU; when the lease in its way is released,
// what it still lacks is asked back from an idle backend at once — its own
// hold is not counted against it.
func TestReclaimForStarvingHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 10*GiB))
		defer r.stop()
		events, cancel, err := r.eng.Subscribe(context.Background(), EventReclaim)
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
		blocker := r.acquire(req(4 * GiB))
		idle := r.acquire(req(4 * GiB))
		r.setReclaimable(idle.ID, true)
		head := r.acquireAsync(req(7*GiB, wait(10*time.Minute))) // 2 GiB free; the idle 4 are not enough
		time.Sleep(36 * time.Second)                             // past backfill_window: 7 GiB held for it
		if v := r.view(); len(v.Held) != 1 {
			t.Fatalf("held %+v; want the head's 7 GiB", v.Held)
		}
		r.release(blocker.ID) // 6 GiB free: the idle backend's 4 make it fit
		synctest.Wait()
		select {
		case ev := <-events:
			if ev.Lease.ID != idle.ID {
				t.Fatalf("asked back %s, want the idle lease %s", ev.Lease.ID, idle.ID)
			}
		default:
			t.Fatal("the idle backend was not asked back after the release: the head's own hold was counted against it")
		}
		r.release(idle.ID) // the backend gives its memory back
		if res := <-head; res.err != nil || res.lease.State != StateGranted {
			t.Fatalf("head: %+v %v; want granted once the idle lease is released", res.lease, res.err)
		}
	})
}

// TestRefusalNamesHeldMemory: a refusal says how much memory is held for
// other waiting requests on the GPU it names.
func TestRefusalNamesHeldMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 24*GiB))
		defer r.stop()
		full := r.fill(0, 14*GiB)
		blocked := r.acquireAsync(req(12*GiB, wait(10*time.Minute)))
		time.Sleep(31 * time.Second)
		_, err := r.eng.Acquire(context.Background(), req(9*GiB)) // the same uid: behind the blocked request
		want := "does not fit now: 9.00 GiB requested on auto, at most 0 B available (12.00 GiB held for other waiting requests)"
		if !errors.Is(err, ErrNoFit) || err.Error() != want {
			t.Errorf("got %v\nwant %s", err, want)
		}
		r.release(full.ID)
		<-blocked
	})
}

// TestNoHoldForRequestsThatCannotFit (issue 25 item 1): one uid pins a
// request per GPU that is larger than usable − foreign there; past the
// backfill window nothing is held for them and another user's request is
// granted.
func TestNoHoldForRequestsThatCannotFit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sims := gpus(4, 24*GiB)
		for i := range sims {
			sims[i].Processes = []inventory.SimProcess{{PID: 60000 + i, Name: "foreign", Used: units.Bytes(10 * GiB)}}
		}
		r := newRig(t, sims)
		defer r.stop()
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				_, _ = r.eng.Acquire(ctx, req(20*GiB, uid(65534), pin("cuda:"+string(rune('0'+i))), wait(10*time.Minute)))
			})
		}
		time.Sleep(3 * time.Minute) // past backfill_window, aged to high
		r.observe()                 // a frame published now
		if v := r.view(); len(v.Held) != 0 || len(v.Queue) != 4 {
			t.Errorf("held %+v for %d queued requests that can never fit; want none", v.Held, len(v.Queue))
		}
		l, err := r.eng.Acquire(context.Background(), req(8*GiB, uid(0), prio(High)))
		if err != nil {
			t.Errorf("root at priority high: %v; want granted", err)
		} else {
			r.release(l.ID)
		}
		stop()
		wg.Wait()
	})
}

// TestHoldsBoundedByShare: one uid's requests that fit once the leases end
// get memory held only up to its fair share (after its first).
func TestHoldsBoundedByShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(4, 24*GiB))
		defer r.stop()
		for i := range 4 {
			r.acquire(req(20*GiB, uid(1000), pin("cuda:"+string(rune('0'+i)))))
		}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				_, _ = r.eng.Acquire(ctx, req(16*GiB, uid(65534), pin("cuda:"+string(rune('0'+i))), wait(10*time.Minute)))
			})
			synctest.Wait()
		}
		time.Sleep(31 * time.Second)
		// 2 uids: a share is 48 GiB, three 16 GiB holds.
		if u := r.uidUse(65534); u.HeldBytes != 48*GiB || u.ShareBytes != 48*GiB || u.Share != 0.5 {
			t.Errorf("uid 65534: %+v; want 48 GiB held of a 48 GiB share", u)
		}
		// A third uid asks: the shares shrink to 32 GiB, one GPU is free of holds.
		l, err := r.eng.Acquire(context.Background(), req(3*GiB, uid(2000)))
		if err != nil {
			t.Fatalf("uid 2000: %v; want granted on the GPU nothing is held on", err)
		}
		if u := r.uidUse(65534); u.HeldBytes != 32*GiB || u.ShareBytes != 32*GiB {
			t.Errorf("uid 65534 with 3 uids: %+v; want 32 GiB held of a 32 GiB share", u)
		}
		r.release(l.ID)
		stop()
		wg.Wait()
	})
}

// TestFairShareOrdersClass: within a priority class the uid that used less
// recently goes first, though it asked later.
func TestFairShareOrdersClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 10*GiB), func(c *rigConfig, _ *Options) { c.Leases.BackfillWindow = units.Duration(time.Hour) })
		defer r.stop()
		heavy := r.acquire(req(8*GiB, uid(1000), ttl(time.Hour)))
		time.Sleep(10 * time.Minute)
		r.release(heavy.ID)
		full := r.fill(0, 10*GiB) // uid 1000 again, but only for a moment
		first := r.acquireAsync(req(6*GiB, uid(1000), wait(time.Hour)))
		synctest.Wait()
		time.Sleep(time.Second)
		second := r.acquireAsync(req(6*GiB, uid(2000), wait(time.Hour)))
		synctest.Wait()
		if q := r.view().Queue; len(q) != 2 || q[0].Holder.UID != 2000 {
			t.Fatalf("queue %v; want uid 2000 (no recent use) first", q)
		}
		r.release(full.ID)
		res := <-second
		if res.err != nil {
			t.Fatalf("uid 2000: %v", res.err)
		}
		select {
		case res := <-first:
			t.Fatalf("uid 1000 granted too: %+v %v", res.lease, res.err)
		default:
		}
		r.release(res.lease.ID)
		if res := <-first; res.err != nil {
			t.Fatal(res.err)
		}
	})
}

// TestAgingStopsBelowLighterUID: aging lifts a low request over a normal
// one of a uid that used more, never over one of a uid that used less.
func TestAgingStopsBelowLighterUID(t *testing.T) {
	for _, tt := range []struct {
		name      string
		heavyUID  int // the uid with 10 minutes of 8 GiB behind it
		wantFirst int
	}{
		{"low of the heavier uid stays below", 1000, 2000},
		{"low of the lighter uid is lifted", 2000, 1000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, gpus(1, 10*GiB), func(c *rigConfig, _ *Options) { c.Leases.BackfillWindow = units.Duration(time.Hour) })
				defer r.stop()
				heavy := r.acquire(req(8*GiB, uid(tt.heavyUID), ttl(time.Hour)))
				time.Sleep(10 * time.Minute)
				r.release(heavy.ID)
				full := r.fill(0, 10*GiB)
				low := r.acquireAsync(req(6*GiB, uid(1000), prio(Low), wait(time.Hour)))
				time.Sleep(3 * time.Minute) // aged past normal, to high
				normal := r.acquireAsync(req(6*GiB, uid(2000), wait(time.Hour)))
				synctest.Wait()
				r.release(full.ID)
				firstCh, otherCh := low, normal
				if tt.wantFirst == 2000 {
					firstCh, otherCh = normal, low
				}
				res := <-firstCh
				if res.err != nil || res.lease.Holder.UID != tt.wantFirst {
					t.Fatalf("first grant: %+v %v; want uid %d", res.lease, res.err, tt.wantFirst)
				}
				r.release(res.lease.ID)
				if res := <-otherCh; res.err != nil {
					t.Fatal(res.err)
				}
			})
		})
	}
}

// TestUseDecays: use grows by GiB per second held and halves every
// fair_share_half_life.
func TestUseDecays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 24*GiB), func(c *rigConfig, _ *Options) {
			c.Placement.FairShareHalfLife = units.Duration(time.Hour)
		})
		defer r.stop()
		l := r.acquire(req(2*GiB, uid(1000), ttl(time.Hour)))
		time.Sleep(100 * time.Second)
		r.release(l.ID)
		lambda := math.Ln2 / 3600
		want := 2 * (1 - math.Exp(-lambda*100)) / lambda
		if u := r.uidUse(1000); math.Abs(u.UseGiBSeconds-want) > 1e-6*want || u.Leases != 0 || u.UseFraction != 1 {
			t.Fatalf("after 100 s of 2 GiB: %+v; want use %.3f GiB·s", u, want)
		}
		time.Sleep(time.Hour)
		r.observe() // a new frame
		if u := r.uidUse(1000); math.Abs(u.UseGiBSeconds-want/2) > 1e-6*want {
			t.Fatalf("an hour later: %.3f GiB·s; want half, %.3f", u.UseGiBSeconds, want/2)
		}
	})
}

// TestLimitsInEngine: [limits] are checked in the step that queues or
// grants a request, so concurrent requests never pass them.
func TestLimitsInEngine(t *testing.T) {
	t.Run("leases under concurrency", func(t *testing.T) {
		r := newRig(t, gpus(1, 24*GiB))
		lim := limits(Limits{Leases: 256})
		var wg sync.WaitGroup
		var mu sync.Mutex
		granted, limited := 0, 0
		for range 300 {
			wg.Go(func() {
				_, err := r.eng.Acquire(context.Background(), req(units.MiB, uid(65534), lim, ttl(time.Hour)))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					granted++
				case errors.Is(err, ErrLimit):
					limited++
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if granted != 256 || limited != 44 || r.uidUse(65534).Leases != 256 {
			t.Errorf("300 at once against [limits] leases = 256: %d granted, %d refused; view %+v", granted, limited, r.uidUse(65534))
		}
		if _, err := r.eng.Acquire(context.Background(), req(units.MiB, uid(0))); err != nil {
			t.Errorf("another uid: %v", err)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		r := newRig(t, gpus(2, 24*GiB))
		lim := limits(Limits{Bytes: 10 * GiB})
		a := r.acquire(req(4*GiB, uid(65534), lim))
		r.acquire(req(4*GiB, uid(65534), lim))
		_, err := r.eng.Acquire(context.Background(), req(4*GiB, uid(65534), lim))
		want := "limit exceeded: uid 65534 holds 8.00 GiB and waits for 0 B; 4.00 GiB more would pass [limits] bytes (10.00 GiB)"
		if !errors.Is(err, ErrLimit) || err.Error() != want {
			t.Errorf("third 4 GiB: %v\nwant %s", err, want)
		}
		if _, err := r.eng.Resize(context.Background(), a.ID, 7*GiB); !errors.Is(err, ErrLimit) {
			t.Errorf("growing past the limit: %v; want ErrLimit", err)
		}
		r.release(a.ID)
		r.acquire(req(4*GiB, uid(65534), lim))
	})
	t.Run("queued", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, gpus(1, 24*GiB))
			defer r.stop()
			full := r.fill(0, 24*GiB)
			lim := limits(Limits{Queued: 2, Leases: 3})
			var chans []<-chan result
			for range 4 {
				chans = append(chans, r.acquireAsync(req(GiB, uid(65534), lim, wait(time.Hour))))
				synctest.Wait()
			}
			var refused []string
			for _, ch := range chans[2:] {
				res := <-ch
				refused = append(refused, res.err.Error())
			}
			if want := "limit exceeded: uid 65534 has 2 lease requests waiting: [limits] queued is 2"; refused[0] != want || refused[1] != want {
				t.Errorf("past [limits] queued: %s", strings.Join(refused, "; "))
			}
			r.release(full.ID)
			for _, ch := range chans[:2] {
				if res := <-ch; res.err != nil {
					t.Error(res.err)
				}
			}
		})
	})
}
