package placement

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestGrantRelease(t *testing.T) {
	r := newRig(t, gpus(2, 24*GiB))
	events, cancel, err := r.eng.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	l := r.acquire(req(4 * GiB))
	if l.State != StateGranted || l.GPUIndex != 1 || l.Bytes != 4*GiB || l.GPUTotalBytes != 24*GiB {
		t.Fatalf("lease = %+v; want granted on GPU 1 (spread keeps GPU 0 free)", l)
	}
	if r.store.len() != 1 {
		t.Fatalf("grant not persisted")
	}
	v := r.view()
	if a := v.GPUs[1]; a.LeasedBytes != 4*GiB || a.AvailableBytes != 20*GiB || len(a.Leases) != 1 {
		t.Errorf("GPU 1 accounting after grant: %+v", a.Account)
	}
	r.release(l.ID)
	again, err := r.eng.Release(context.Background(), l.ID, "twice")
	if err != nil || again.State != StateReleased || again.Reason != "test" {
		t.Errorf("second release = %+v, %v; want the released lease, no error", again, err)
	}
	if err := r.eng.Sync(context.Background()); err != nil || r.store.len() != 0 {
		t.Errorf("released lease still stored (sync: %v)", err)
	}
	var types []EventType
	for len(types) < 3 {
		types = append(types, (<-events).Type)
	}
	if types[0] != EventRequested || types[1] != EventGranted || types[2] != EventReleased {
		t.Errorf("events = %v", types)
	}
	if _, err := r.eng.Release(context.Background(), "l-nope", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("release unknown: %v", err)
	}
}

func TestRejections(t *testing.T) {
	r := newRig(t, gpus(2, 24*GiB))
	r.acquire(req(20*GiB, pin("cuda:0")))
	tests := []struct {
		name string
		req  Request
		err  error
		msg  string
	}{
		{"no fit now", req(10*GiB, pin("cuda:0")), ErrNoFit, "does not fit now: 10.00 GiB requested on cuda:0, at most 4.00 GiB available (GPU 0)"},
		{"larger than any GPU", req(30 * GiB), ErrTooLarge, "larger than any GPU can hold: 30.00 GiB requested, the largest usable memory is 24.00 GiB"},
		{"no such GPU", req(GiB, pin("cuda:5")), ErrNoSuchGPU, "no such GPU: cuda:5 is not on this machine (2 GPUs)"},
		{"zero bytes", req(0), ErrInvalid, "invalid request: memory_bytes must be above 0"},
		{"ttl above max", req(GiB, ttl(48*time.Hour)), ErrInvalid, "invalid request: ttl 48h0m0s exceeds [leases] max_ttl 24h0m0s"},
		{"no holder", Request{Bytes: GiB}, ErrInvalid, "invalid request: holder pid must be above 0"},
	}
	for _, tt := range tests {
		l, err := r.eng.Acquire(context.Background(), tt.req)
		if !errors.Is(err, tt.err) || err.Error() != tt.msg {
			t.Errorf("%s: error = %v\nwant %s", tt.name, err, tt.msg)
		}
		if l.State != StateRejected {
			t.Errorf("%s: state %s", tt.name, l.State)
		}
	}
}

func TestCPULeases(t *testing.T) {
	r := newRig(t, gpus(1, 8*GiB))
	l := r.acquire(req(0, pin("cpu")))
	if l.GPU != CPU || l.GPUIndex != -1 {
		t.Errorf("cpu lease = %+v", l)
	}
	none := newRig(t, nil)
	l = none.acquire(req(GiB))
	if l.GPU != CPU {
		t.Errorf("auto on a machine without GPUs = %+v, want a cpu lease", l)
	}
}

func TestTTLRenewExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 24*GiB))
		defer r.stop()
		l := r.acquire(req(4*GiB, ttl(10*time.Second)))
		time.Sleep(8 * time.Second)
		renewed, err := r.eng.Renew(context.Background(), l.ID, 0)
		if err != nil || !renewed.Expires.Equal(time.Now().Add(10*time.Second)) {
			t.Fatalf("renew = %+v, %v", renewed, err)
		}
		time.Sleep(9 * time.Second) // 17 s: past the first deadline, before the renewed one
		if got, _ := r.eng.Get(context.Background(), l.ID); got.State != StateGranted {
			t.Fatalf("renewed lease ended early: %+v", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		got, _ := r.eng.Get(context.Background(), l.ID)
		if got.State != StateExpired || got.Reason != "not renewed within its 10s TTL" {
			t.Errorf("after TTL: %+v", got)
		}
		_ = r.eng.Sync(context.Background())
		if r.store.len() != 0 || r.view().GPUs[0].LeasedBytes != 0 {
			t.Error("expired lease still counted")
		}
		if _, err := r.eng.Renew(context.Background(), l.ID, 0); !errors.Is(err, ErrEnded) {
			t.Errorf("renew after expiry: %v", err)
		}
	})
}

func TestResize(t *testing.T) {
	r := newRig(t, gpus(1, 24*GiB))
	a := r.acquire(req(10 * GiB))
	b := r.acquire(req(10 * GiB))
	if _, err := r.eng.Resize(context.Background(), a.ID, 15*GiB); !errors.Is(err, ErrNoFit) {
		t.Errorf("grow beyond free: %v", err)
	}
	if l, err := r.eng.Resize(context.Background(), a.ID, 14*GiB); err != nil || l.Bytes != 14*GiB {
		t.Errorf("grow within free: %+v %v", l, err)
	}
	waiter := r.acquireAsync(req(4*GiB, wait(time.Minute)))
	time.Sleep(10 * time.Millisecond)
	if _, err := r.eng.Resize(context.Background(), b.ID, 6*GiB); err != nil {
		t.Fatal(err)
	}
	if res := <-waiter; res.err != nil || res.lease.State != StateGranted {
		t.Errorf("waiter after shrink: %+v %v", res.lease, res.err)
	}
}

// fill takes all memory of GPU index with one lease.
func (r *rig) fill(index int, bytes int64) Lease {
	return r.acquire(req(bytes, pin("cuda:"+string(rune('0'+index)))))
}

func TestQueuePriorityAndFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 24*GiB))
		defer r.stop()
		full := r.fill(0, 24*GiB)
		var chans []<-chan result
		order := []Priority{Low, Normal, High, Normal, High}
		for _, p := range order {
			chans = append(chans, r.acquireAsync(req(24*GiB, prio(p), wait(time.Hour))))
			synctest.Wait()
			time.Sleep(time.Millisecond) // distinct arrival times
		}
		v := r.view()
		if v.Queued["high"] != 2 || v.Queued["normal"] != 2 || v.Queued["low"] != 1 {
			t.Fatalf("queued by priority = %v", v.Queued)
		}
		// Expected grant order: high (2), high (4), normal (1), normal (3), low (0).
		prev := full.ID
		for _, i := range []int{2, 4, 1, 3, 0} {
			r.release(prev)
			res := <-chans[i]
			if res.err != nil {
				t.Fatalf("waiter %d: %v", i, res.err)
			}
			prev = res.lease.ID
			synctest.Wait()
			for j, ch := range chans {
				if j != i && len(ch) > 0 {
					t.Fatalf("after granting waiter %d, waiter %d was also answered", i, j)
				}
			}
		}
	})
}

func TestLongPollGrantOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 24*GiB))
		defer r.stop()
		full := r.fill(0, 20*GiB)
		ch := r.acquireAsync(req(10*GiB, wait(time.Minute)))
		time.Sleep(5 * time.Second)
		start := time.Now()
		r.release(full.ID)
		res := <-ch
		if res.err != nil || time.Since(start) != 0 {
			t.Errorf("waiter granted %v after the release (%v); want at once", time.Since(start), res.err)
		}
	})
}

func TestBackfillThenReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 24*GiB))
		defer r.stop()
		big := r.fill(0, 20*GiB)
		blocked := r.acquireAsync(req(10*GiB, wait(10*time.Minute)))
		synctest.Wait()
		// Backfill: a small request behind the blocked one fits and passes it.
		small := r.acquire(req(3 * GiB))
		r.release(small.ID)
		// Past the backfill window, memory is held for the blocked request.
		time.Sleep(31 * time.Second)
		if _, err := r.eng.Acquire(context.Background(), req(3*GiB)); !errors.Is(err, ErrNoFit) {
			t.Fatalf("small request after the backfill window: %v; want ErrNoFit (memory held for the head)", err)
		}
		if v := r.eng.View(); len(v.Held) != 1 || v.Held[0].Bytes != 10*GiB || v.GPUs[0].HeldBytes != 10*GiB || v.Held[0].GPU != v.GPUs[0].UUID {
			t.Errorf("view: held %+v, GPU 0 held %d; want 10 GiB held on GPU 0 for the blocked request", v.Held, v.GPUs[0].HeldBytes)
		}
		r.release(big.ID)
		if res := <-blocked; res.err != nil || res.lease.Bytes != 10*GiB {
			t.Errorf("blocked request: %+v %v", res.lease, res.err)
		}
	})
}

// TestNoStarvation runs a stream of small high-priority requests, staggered
// so the GPU never has room for a large one; a large low-priority request
// must still be granted (reservation after backfill_window, then aging).
func TestNoStarvation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 24*GiB))
		defer r.stop()
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i := 0; i < 6; i++ { // 6 workers × 4 GiB keep the GPU full
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * 800 * time.Millisecond)
				for ctx.Err() == nil {
					l, err := r.eng.Acquire(ctx, req(4*GiB, prio(High), wait(time.Minute)))
					if err != nil {
						continue
					}
					time.Sleep(5 * time.Second)
					_, _ = r.eng.Release(context.Background(), l.ID, "done")
				}
			}()
		}
		time.Sleep(6 * time.Second)
		start := time.Now()
		res := <-r.acquireAsync(req(20*GiB, prio(Low), wait(10*time.Minute)))
		stop()
		wg.Wait()
		if res.err != nil {
			t.Fatalf("large low-priority request starved: %v", res.err)
		}
		waited := time.Since(start)
		if waited < 30*time.Second {
			t.Errorf("granted after %v, before the backfill window: the stream was not keeping the GPU full", waited)
		}
		t.Logf("large low-priority request granted after %v", waited)
		r.release(res.lease.ID)
	})
}

func TestQueueBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 24*GiB), func(c *rigConfig, _ *Options) { c.Leases.MaxQueue = 2 })
		defer r.stop()
		full := r.fill(0, 24*GiB)
		a, b := r.acquireAsync(req(GiB, wait(time.Hour))), r.acquireAsync(req(GiB, wait(time.Hour)))
		synctest.Wait()
		_, err := r.eng.Acquire(context.Background(), req(GiB, wait(time.Hour)))
		if !errors.Is(err, ErrQueueFull) || err.Error() != "queue full: 2 requests are waiting ([leases] max_queue)" {
			t.Errorf("third waiter: %v", err)
		}
		r.release(full.ID)
		<-a
		<-b
	})
}

func TestWaitDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 24*GiB))
		defer r.stop()
		r.fill(0, 20*GiB)
		start := time.Now()
		_, err := r.eng.Acquire(context.Background(), req(10*GiB, wait(5*time.Second)))
		want := "timed out waiting for memory after 5s: does not fit now: 10.00 GiB requested on auto, at most 4.00 GiB available (GPU 0)"
		if !errors.Is(err, ErrTimeout) || err.Error() != want || time.Since(start) != 5*time.Second {
			t.Errorf("after %v: %v\nwant %s", time.Since(start), err, want)
		}
	})
}

func TestPinnedWaitsForItsGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(2, 24*GiB))
		defer r.stop()
		full := r.fill(1, 24*GiB)
		ch := r.acquireAsync(req(8*GiB, pin("cuda:1"), wait(time.Minute)))
		synctest.Wait()
		if len(ch) != 0 {
			t.Fatal("pinned request granted elsewhere")
		}
		r.release(full.ID)
		if res := <-ch; res.err != nil || res.lease.GPUIndex != 1 {
			t.Errorf("pinned request: %+v %v", res.lease, res.err)
		}
	})
}

func TestWithdrawAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 24*GiB))
		defer r.stop()
		full := r.fill(0, 24*GiB)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := r.eng.Acquire(ctx, req(GiB, wait(time.Hour))); done <- err }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, ErrCancelled) {
			t.Errorf("cancelled wait: %v", err)
		}
		ch := r.acquireAsync(req(GiB, wait(time.Hour)))
		synctest.Wait()
		q := r.view().Queue
		if len(q) != 1 {
			t.Fatalf("queue = %v", q)
		}
		r.release(q[0].ID) // DELETE of a queued request cancels it
		if res := <-ch; !errors.Is(res.err, ErrCancelled) {
			t.Errorf("deleted waiter: %v", res.err)
		}
		r.release(full.ID)
		if v := r.view(); len(v.Queue) != 0 || v.GPUs[0].LeasedBytes != 0 {
			t.Errorf("leftovers: %+v", v)
		}
	})
}

func TestHolderExited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 24*GiB))
		defer r.stop()
		a := r.acquire(req(8*GiB, holder(777)))
		r.acquire(req(8*GiB, holder(777)))
		other := r.acquire(req(8*GiB, holder(778)))
		if _, err := r.eng.AddPID(context.Background(), other.ID, 779); err != nil {
			t.Fatal(err)
		}
		waiting := r.acquireAsync(req(8*GiB, holder(777), wait(time.Hour)))
		synctest.Wait()
		ended, err := r.eng.HolderExited(context.Background(), 777)
		if err != nil || len(ended) != 2 {
			t.Fatalf("HolderExited released %d leases: %v", len(ended), err)
		}
		if res := <-waiting; !errors.Is(res.err, ErrCancelled) {
			t.Errorf("dead holder's waiter: %v", res.err)
		}
		got, _ := r.eng.Get(context.Background(), a.ID)
		if got.State != StateReleased || got.Reason != "holder (pid 777) exited" {
			t.Errorf("lease after holder exit: %+v", got)
		}
		if v := r.view(); v.GPUs[0].LeasedBytes != 8*GiB {
			t.Errorf("leased after exit = %d", v.GPUs[0].LeasedBytes)
		}
	})
}

func TestReconcileOverrunAndForeign(t *testing.T) {
	var killed []int
	r := newRig(t, gpus(1, 24*GiB), func(c *rigConfig, o *Options) {
		c.Leases.Overrun = OverrunKill
		o.Signal = func(pid int) { killed = append(killed, pid) }
	})
	events, cancel, _ := r.eng.Subscribe(context.Background())
	defer cancel()
	l := r.acquire(req(4*GiB, holder(900)))
	observe := func() {
		snap, err := r.reader.Refresh(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.eng.Observe(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
	}
	_ = r.sim.SetProcess(0, 900, "whisper", 4*GiB+300*1<<20) // within 10 %
	_ = r.sim.SetProcess(0, 901, "stray", 2*GiB)             // no lease: foreign
	observe()
	a := r.view().GPUs[0]
	// Within tolerance but above its lease: the hardware term (free) wins over
	// the budget (usable − leased − foreign = 18 GiB).
	if a.AttributedBytes != 4*GiB+300<<20 || a.ForeignBytes != 2*GiB || a.AvailableBytes != a.FreeBytes || a.FreeBytes >= 18*GiB {
		t.Errorf("accounting: %+v", a.Account)
	}
	_ = r.sim.SetProcess(0, 900, "whisper", 5*GiB) // 25 % over
	observe()
	got, _ := r.eng.Get(context.Background(), l.ID)
	if !got.Overrun || got.UsedBytes != 5*GiB || len(killed) != 1 || killed[0] != 900 {
		t.Errorf("overrun: lease %+v, killed %v", got, killed)
	}
	for ev := range events {
		if ev.Type == EventOverrun {
			if ev.Reason != "uses 5.00 GiB of a 4.00 GiB lease (tolerance 10%)" {
				t.Errorf("overrun reason %q", ev.Reason)
			}
			break
		}
	}
}

// TestFreshReadingDispatches: memory freed by a foreign process shows in the
// next reading, which grants a waiter without any polling loop.
func TestFreshReadingDispatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, gpus(1, 24*GiB))
		defer r.stop()
		_ = r.sim.SetProcess(0, 950, "stray", 20*GiB)
		ch := r.acquireAsync(req(10*GiB, wait(time.Minute)))
		synctest.Wait()
		r.sim.RemoveProcess(950)
		time.Sleep(time.Second)
		snap, _ := r.reader.Refresh(context.Background())
		_ = r.eng.Observe(context.Background(), snap)
		if res := <-ch; res.err != nil {
			t.Errorf("waiter after foreign memory freed: %v", res.err)
		}
	})
}

func TestStoreFailureGrantsNothing(t *testing.T) {
	r := newRig(t, gpus(1, 24*GiB))
	r.store.fail = errors.New("disk full")
	_, err := r.eng.Acquire(context.Background(), req(4*GiB))
	if err == nil || !strings.Contains(err.Error(), "persist lease: disk full") {
		t.Fatalf("acquire with a failing store: %v", err)
	}
	if v := r.view(); v.GPUs[0].LeasedBytes != 0 {
		t.Errorf("a lease that was not persisted is counted: %+v", v.GPUs[0].Account)
	}
	r.store.fail = nil
	l := r.acquire(req(4 * GiB))
	r.store.fail = errors.New("disk full")
	if _, err := r.eng.Renew(context.Background(), l.ID, time.Minute); err == nil {
		t.Error("renew with a failing store succeeded")
	}
	if got, _ := r.eng.Get(context.Background(), l.ID); got.TTL != l.TTL || !got.Expires.Equal(l.Expires) {
		t.Errorf("failed renew changed the lease: %+v", got)
	}
}

func TestRestore(t *testing.T) {
	r := newRig(t, gpus(1, 24*GiB))
	restored := Lease{ID: "l-old", State: StateGranted, GPU: r.view().GPUs[0].UUID, GPUIndex: 0, Bytes: 20 * GiB,
		Holder: Holder{PID: 42}, TTL: time.Hour, Granted: time.Now(), Expires: time.Now().Add(time.Hour)}
	if err := r.eng.Restore(context.Background(), []Lease{restored}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eng.Acquire(context.Background(), req(10*GiB)); !errors.Is(err, ErrNoFit) {
		t.Errorf("restored bytes granted twice: %v", err)
	}
}

// TestSummaryMatchesView: the O(GPUs) summary (GET /v1/status) says what
// the assembled view does.
func TestSummaryMatchesView(t *testing.T) {
	r := newRig(t, gpus(2, 24*GiB))
	for range 3 {
		r.acquire(req(7 * GiB))
	}
	r.acquireAsync(req(20*GiB, wait(time.Minute)))
	for len(r.view().Queue) != 1 {
		time.Sleep(time.Millisecond)
	}
	// The two reads may straddle a publish (a reading, the waiter's hold):
	// they must agree once nothing changes in between.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		v, s := r.view(), r.eng.Summary()
		var leases int
		var leased, held int64
		for _, g := range v.GPUs {
			leases += len(g.Leases)
			leased += g.LeasedBytes
			held += g.HeldBytes
		}
		if s.Leases == leases+len(v.CPU) && s.CPULeases == len(v.CPU) && s.Queued == len(v.Queue) && s.LeasedBytes == leased &&
			s.HeldBytes == held && s.Stats == v.Stats && s.QueuedBy["normal"] == v.Queued["normal"] && s.GPUs == len(v.GPUs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("summary %+v, view: %d leases, %d queued, %d leased, %d held, %+v", s, leases, len(v.Queue), leased, held, v.Stats)
		}
	}
}
