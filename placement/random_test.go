package placement

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

var seedFlag = flag.Uint64("seed", 0, "seed for TestRandomized (0: time-based)")

// TestRandomized drives thousands of requests, renewals, resizes, releases,
// holder exits and expiries from many goroutines against 8 simulated GPUs
// with foreign memory, checking after every step of the owner loop that no
// GPU is promised more than usable − foreign, and from the event stream that
// no request is granted twice and every one ends granted-then-ended,
// rejected or expired. Rerun a failure with -seed=N.
func TestRandomized(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with go test -run TestRandomized -seed=%d ./placement)", seed, seed)
	synctest.Test(t, func(t *testing.T) {
		var violations []string
		seen := map[string]bool{} // lease IDs granted before this step
		sims := gpus(8, 24*GiB)
		for i := range sims {
			sims[i].Processes = []inventory.SimProcess{{PID: 50000 + i, Name: "foreign", Used: units.Bytes(int64(i) * GiB / 2)}}
		}
		r := newRig(t, sims, func(c *rigConfig, o *Options) {
			c.Placement.Reserved = units.Bytes(256 * units.MiB)
			c.Placement.SafetyFactor = 0.9
			c.Leases.MaxQueue = 64
			c.Leases.BackfillWindow = units.Duration(2 * time.Second)
			c.Leases.Aging = units.Duration(3 * time.Second)
			o.afterOp = func(s *state) { violations = append(violations, checkInvariants(s, seen)...) }
		})
		defer r.stop()
		events, cancel, err := r.eng.Subscribe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		log := &eventLog{byID: map[string][]EventType{}}
		logDone := make(chan struct{})
		go func() { defer close(logDone); log.consume(events) }()

		var wg sync.WaitGroup
		for w := 0; w < 32; w++ {
			wg.Add(1)
			go func() { defer wg.Done(); worker(r, rand.New(rand.NewPCG(seed, uint64(w))), 100) }()
		}
		wg.Wait()
		time.Sleep(time.Minute) // every abandoned lease expires
		synctest.Wait()
		cancel()
		<-logDone
		var nv int
		var first string
		_ = r.eng.do(context.Background(), func(*state) { // read on the owner loop
			nv = len(violations)
			if nv > 0 {
				first = violations[0]
			}
		})
		if nv > 0 {
			t.Fatalf("seed %d: %d invariant violations, first: %s", seed, nv, first)
		}
		if err := log.verify(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		_ = r.eng.Sync(context.Background())
		if v := r.view(); len(v.Queue) != 0 || r.store.len() != 0 {
			t.Fatalf("seed %d: leftovers: %d queued, %d stored", seed, len(v.Queue), r.store.len())
		}
		t.Logf("%d requests: %+v", len(log.byID), r.view().Stats)
	})
}

// randomUIDs are the holders' uids; those in randomLimits ask with limits.
var (
	randomUIDs   = []int{0, 1000, 1001, 1002}
	randomLimits = map[int]Limits{1001: {Leases: 4, Queued: 2, Bytes: 30 * GiB}, 1002: {Leases: 8, Bytes: 48 * GiB}}
)

func worker(r *rig, rng *rand.Rand, n int) {
	ctx := context.Background()
	for i := 0; i < n; i++ {
		q := req(int64(1+rng.IntN(12))*GiB, prio(Priority(rng.IntN(3)-1)), ttl(time.Duration(1+rng.IntN(10))*time.Second))
		if rng.IntN(10) == 0 { // fits only on GPUs with little foreign memory
			q.Bytes = int64(18+rng.IntN(4)) * GiB
		}
		if rng.IntN(2) == 0 {
			q.Wait = time.Duration(rng.IntN(3000)) * time.Millisecond
		}
		if rng.IntN(4) == 0 {
			pin(fmt.Sprintf("cuda:%d", rng.IntN(8)))(&q)
		}
		q.Holder.UID = randomUIDs[rng.IntN(len(randomUIDs))]
		q.Limits = randomLimits[q.Holder.UID]
		l, err := r.eng.Acquire(ctx, q)
		if err != nil {
			continue
		}
		if l.GPUIndex >= 0 && rng.IntN(3) == 0 { // the holder allocates part of its lease
			_ = r.sim.SetProcess(l.GPUIndex, l.Holder.PID, "holder", l.Bytes*int64(50+rng.IntN(51))/100)
			if snap, err := r.reader.Refresh(ctx); err == nil {
				_ = r.eng.Observe(ctx, snap)
			}
		}
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond)
		r.sim.RemoveProcess(l.Holder.PID) // the holder frees its memory before it lets go
		switch k := rng.IntN(10); {
		case k < 5:
			_, _ = r.eng.Release(ctx, l.ID, "done")
		case k < 7:
			_, _ = r.eng.Renew(ctx, l.ID, time.Duration(1+rng.IntN(5))*time.Second)
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Millisecond)
			_, _ = r.eng.Release(ctx, l.ID, "done")
		case k < 8:
			_, _ = r.eng.Resize(ctx, l.ID, int64(1+rng.IntN(12))*GiB)
			_, _ = r.eng.Release(ctx, l.ID, "done")
		case k < 9:
			_, _ = r.eng.HolderExited(ctx, l.Holder.PID)
		default: // abandoned: expires by TTL
		}
	}
}

// checkInvariants runs on the owner loop after every step. A step that
// grew a GPU's leases must leave leased ≤ usable − foreign there: grants
// never over-commit. (Foreign memory may grow after a grant — a process
// outliving its lease, a reading taken before a release — which can push a
// GPU over without any grant; that is the overcommit the second term of the
// formula exists for, and no grant may be made on it.)
func checkInvariants(s *state, seen map[string]bool) []string {
	var bad []string
	granted := map[string]bool{} // GPUs with a lease granted in this step
	for id, l := range s.leases {
		if !seen[id] {
			seen[id] = true
			granted[l.GPU] = true
		}
	}
	for _, a := range s.accounts() {
		grew := granted[a.UUID]
		if grew && a.LeasedBytes > a.UsableBytes-a.ForeignBytes {
			bad = append(bad, fmt.Sprintf("GPU %d: a grant made leased %d > usable %d − foreign %d", a.Index, a.LeasedBytes, a.UsableBytes, a.ForeignBytes))
		}
		if grew && a.AvailableBytes < 0 {
			bad = append(bad, fmt.Sprintf("GPU %d: a grant left available %d < 0", a.Index, a.AvailableBytes))
		}
	}
	for id, l := range s.leases {
		if l.State != StateGranted || s.findWaiter(id) != nil {
			bad = append(bad, fmt.Sprintf("lease %s: state %s, queued %v", id, l.State, s.findWaiter(id) != nil))
		}
	}
	if s.queue.len() > s.opts.Leases.MaxQueue {
		bad = append(bad, fmt.Sprintf("queue length %d > max %d", s.queue.len(), s.opts.Leases.MaxQueue))
	}
	bad = append(bad, checkUIDs(s)...)
	return append(bad, checkBooks(s)...)
}

// checkUIDs compares the per-uid counts with a recount, checks each uid's
// limits, and the holds of the plan: only where the request fits once the
// leases end, and per uid within its share beyond the first.
func checkUIDs(s *state) []string {
	var bad []string
	want := map[int]*uidAcct{}
	acct := func(uid int) *uidAcct {
		if want[uid] == nil {
			want[uid] = &uidAcct{}
		}
		return want[uid]
	}
	for _, l := range s.leases {
		u := acct(l.Holder.UID)
		u.leases++
		if l.GPU != CPU {
			u.bytes += l.Bytes
		}
	}
	for _, w := range s.queue.byID {
		u := acct(w.lease.Holder.UID)
		u.queued[classOf(w.lease.Priority)]++
		u.queuedBytes += w.lease.Bytes
	}
	active := 0
	for uid, w := range want {
		got := s.uids[uid]
		if got == nil || got.leases != w.leases || got.bytes != w.bytes || got.queued != w.queued || got.queuedBytes != w.queuedBytes {
			bad = append(bad, fmt.Sprintf("uid %d: counts %+v, recount %+v", uid, got, w))
			continue
		}
		if w.active() {
			active++
		}
		if lim, ok := randomLimits[uid]; ok && !withinLimits(w, lim) {
			bad = append(bad, fmt.Sprintf("uid %d: %+v passes its limits %+v", uid, w, lim))
		}
	}
	if active != s.activeUIDs {
		bad = append(bad, fmt.Sprintf("%d active uids counted, %d recounted", s.activeUIDs, active))
	}
	_, hold, heldOn := s.plan(s.now())
	heldBy, holds := map[int]int64{}, map[int]int{}
	for id, gpu := range heldOn {
		w := s.queue.byID[id]
		a, ok := s.accountOf(gpu)
		if w == nil || !ok {
			bad = append(bad, fmt.Sprintf("hold for %s on %s: no such waiter or GPU", id, gpu))
			continue
		}
		if w.lease.Bytes > a.UsableBytes-a.ForeignBytes {
			bad = append(bad, fmt.Sprintf("hold for %s (%d bytes) on GPU %d where usable − foreign is %d", id, w.lease.Bytes, a.Index, a.UsableBytes-a.ForeignBytes))
		}
		heldBy[w.lease.Holder.UID] += w.lease.Bytes
		holds[w.lease.Holder.UID]++
	}
	for uid, b := range heldBy {
		if holds[uid] > 1 && b > s.shareBytes() {
			bad = append(bad, fmt.Sprintf("uid %d: %d holds of %d bytes pass its share %d", uid, holds[uid], b, s.shareBytes()))
		}
	}
	var sum int64
	for _, v := range hold {
		sum += v
	}
	var sumBy int64
	for _, v := range heldBy {
		sumBy += v
	}
	if sum != sumBy {
		bad = append(bad, fmt.Sprintf("held %d per GPU, %d per uid", sum, sumBy))
	}
	return bad
}

func withinLimits(u *uidAcct, lim Limits) bool {
	n := u.waiting()
	return (lim.Queued == 0 || n <= lim.Queued) && (lim.Leases == 0 || u.leases+n <= lim.Leases) &&
		(lim.Bytes == 0 || u.bytes+u.queuedBytes <= lim.Bytes)
}

// checkBooks compares the running sums with the formula applied from
// scratch, and the published leases and queue with the state.
func checkBooks(s *state) []string {
	var bad []string
	byGPU := map[string][]*Lease{}
	for _, l := range s.leases {
		if l.GPU != CPU {
			byGPU[l.GPU] = append(byGPU[l.GPU], l)
		}
	}
	accts := s.accounts()
	for i, g := range s.snap.GPUs {
		ls := byGPU[g.UUID]
		slices.SortFunc(ls, func(a, b *Lease) int { return cmp.Compare(a.ID, b.ID) })
		uses := make([]LeaseUse, 0, len(ls))
		for _, l := range ls {
			uses = append(uses, LeaseUse{Bytes: l.Bytes, Holder: l.Holder.PID, PIDs: l.PIDs})
		}
		if want := Accounting(g, s.opts.Placement, uses); accts[i] != want {
			bad = append(bad, fmt.Sprintf("GPU %d: running account %+v, from scratch %+v", g.Index, accts[i], want))
		}
		if n := tsize(s.bookBy[g.UUID].pub); n != len(ls) {
			bad = append(bad, fmt.Sprintf("GPU %d: %d leases published, %d granted", g.Index, n, len(ls)))
		}
	}
	if n := tsize(s.queue.published()); n != s.queue.len() || s.deadlines.len() != s.queue.len() {
		bad = append(bad, fmt.Sprintf("queue: %d published, %d deadlines, %d waiting", n, s.deadlines.len(), s.queue.len()))
	}
	if top, ok := s.gtree.top(); true {
		want, wok := Pick(PolicySpread, s.opts.Placement.Score, accts, 1, Normal)
		if ok != wok || (ok && top.UUID != want.UUID) {
			bad = append(bad, fmt.Sprintf("spread index picks %v %v, a scan %v %v", top, ok, want.UUID, wok))
		}
	}
	entries := 0
	for _, set := range s.owners {
		entries += len(set)
	}
	want := 0
	for _, l := range s.leases {
		for _, pid := range uniquePIDs(l) {
			want++
			if _, ok := s.owners[pid][l]; !ok {
				bad = append(bad, fmt.Sprintf("lease %s not indexed under pid %d", l.ID, pid))
			}
		}
	}
	if entries != want {
		bad = append(bad, fmt.Sprintf("pid index has %d entries, want %d", entries, want))
	}
	if s.expiry.len() != len(s.leases) {
		bad = append(bad, fmt.Sprintf("%d expiries for %d leases", s.expiry.len(), len(s.leases)))
	}
	return bad
}

type eventLog struct {
	byID map[string][]EventType
}

func (l *eventLog) consume(ch <-chan Event) {
	for ev := range ch {
		l.byID[ev.Lease.ID] = append(l.byID[ev.Lease.ID], ev.Type)
	}
}

// verify checks each request's life: requested, maybe queued, then either
// rejected, or granted followed by renewals/resizes/overruns and exactly one
// of released or expired.
func (l *eventLog) verify() error {
	for id, evs := range l.byID {
		if len(evs) < 2 || evs[0] != EventRequested {
			return fmt.Errorf("%s: events %v", id, evs)
		}
		rest := evs[1:]
		if rest[0] == EventQueued {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return fmt.Errorf("%s never ended: %v", id, evs)
		}
		switch rest[0] {
		case EventRejected:
			if len(rest) != 1 {
				return fmt.Errorf("%s: events after rejection: %v", id, evs)
			}
		case EventGranted:
			last := rest[len(rest)-1]
			if last != EventReleased && last != EventExpired {
				return fmt.Errorf("%s granted but never ended: %v", id, evs)
			}
			for _, e := range rest[1 : len(rest)-1] {
				if e != EventRenewed && e != EventResized && e != EventOverrun {
					return fmt.Errorf("%s: %s inside a lease's life: %v", id, e, evs)
				}
			}
		default:
			return fmt.Errorf("%s: events %v", id, evs)
		}
	}
	return nil
}
