package placement

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
)

// Per-uid accounting. The owner loop keeps, per holder uid, what it holds
// (granted leases and their GPU bytes), what it waits for (queued requests
// and their bytes) and its recent use, changing them with every lease and
// request in O(1). A request's [limits] are checked against these counters
// in the step that queues or grants it, so concurrent requests cannot pass
// a limit; the queue orders each priority class by recent use (fair share);
// memory held for a uid's starving requests is bounded by its share.

// Limits bound what one uid may hold and wait for at once ([limits] in
// wsched.toml); 0 means no limit.
type Limits struct {
	// Leases bounds granted leases plus waiting requests.
	Leases int
	// Queued bounds waiting requests.
	Queued int
	// Bytes bounds GPU bytes granted plus waiting.
	Bytes int64
}

// uidAcct is one uid's running counts and recent use.
type uidAcct struct {
	leases      int    // granted, GPU and CPU
	bytes       int64  // granted on GPUs
	queued      [3]int // waiting, by class (low, normal, high)
	queuedBytes int64
	// use is GiB·seconds of granted GPU memory decayed with the half-life,
	// as of at; it grows at bytes/GiB per second in between.
	use float64
	at  time.Time
}

func (u *uidAcct) waiting() int { return u.queued[0] + u.queued[1] + u.queued[2] }

// active says the uid counts in the fair share: it holds GPU memory or
// waits for some.
func (u *uidAcct) active() bool { return u.bytes > 0 || u.waiting() > 0 }

// useAt is the uid's decayed use at now, without changing it.
func (u *uidAcct) useAt(now time.Time, halfLife time.Duration) float64 {
	d := now.Sub(u.at).Seconds()
	if d <= 0 || u.at.IsZero() {
		return u.use
	}
	rate := float64(u.bytes) / float64(units.GiB)
	if halfLife <= 0 {
		return u.use + rate*d
	}
	lambda := math.Ln2 / halfLife.Seconds()
	k := math.Exp(-lambda * d)
	return u.use*k + rate*(1-k)/lambda
}

// uid returns uid's account, creating it.
func (s *state) uid(uid int) *uidAcct {
	u := s.uids[uid]
	if u == nil {
		u = &uidAcct{at: s.now()}
		s.uids[uid] = u
	}
	return u
}

// changeUID applies f to uid's account, bringing its use up to now first
// (f may change the rate it grows at) and keeping the count of active uids.
func (s *state) changeUID(uid int, f func(*uidAcct)) {
	u := s.uid(uid)
	now := s.now()
	u.use, u.at = u.useAt(now, s.halfLife()), now
	was := u.active()
	f(u)
	switch is := u.active(); {
	case is && !was:
		s.activeUIDs++
	case was && !is:
		s.activeUIDs--
	}
	s.uidsDirty = true
}

func (s *state) halfLife() time.Duration { return s.opts.Placement.FairShareHalfLife.D() }

// uidGranted counts a lease placed (n = 1) or taken off (n = -1).
func (s *state) uidGranted(l *Lease, n int) {
	s.changeUID(l.Holder.UID, func(u *uidAcct) {
		u.leases += n
		if l.GPU != CPU {
			u.bytes += int64(n) * l.Bytes
		}
	})
}

// uidQueued counts a waiter added to the queue (n = 1) or removed (-1).
func (s *state) uidQueued(w *waiter, n int) {
	s.changeUID(w.lease.Holder.UID, func(u *uidAcct) {
		u.queued[classOf(w.lease.Priority)] += n
		u.queuedBytes += int64(n) * w.lease.Bytes
	})
}

// admit checks a new request against its limits, counting what its uid
// holds and waits for now, and the request itself.
func (s *state) admit(l *Lease, lim Limits) error {
	if lim == (Limits{}) {
		return nil
	}
	var u uidAcct
	if p := s.uids[l.Holder.UID]; p != nil {
		u = *p
	}
	uid, n := l.Holder.UID, u.waiting()
	switch {
	case lim.Queued > 0 && n >= lim.Queued:
		return fmt.Errorf("%w: uid %d has %d lease requests waiting: [limits] queued is %d", ErrLimit, uid, n, lim.Queued)
	case lim.Leases > 0 && u.leases+n >= lim.Leases:
		return fmt.Errorf("%w: uid %d holds %d leases and waits for %d: [limits] leases is %d", ErrLimit, uid, u.leases, n, lim.Leases)
	case lim.Bytes > 0 && l.Device.Kind != device.CPU && u.bytes+u.queuedBytes+l.Bytes > lim.Bytes:
		return fmt.Errorf("%w: uid %d holds %s and waits for %s; %s more would pass [limits] bytes (%s)", ErrLimit, uid,
			units.FormatBytes(u.bytes), units.FormatBytes(u.queuedBytes), units.FormatBytes(l.Bytes), units.FormatBytes(lim.Bytes))
	}
	return nil
}

// admitGrowth checks a resize that grows l by delta against its limits.
func (s *state) admitGrowth(l *Lease, delta int64) error {
	if l.limitBytes <= 0 || l.GPU == CPU {
		return nil
	}
	u := s.uids[l.Holder.UID]
	if held := u.bytes + u.queuedBytes; held+delta > l.limitBytes {
		return fmt.Errorf("%w: uid %d holds %s and waits for %s; growing by %s would pass [limits] bytes (%s)", ErrLimit, l.Holder.UID,
			units.FormatBytes(u.bytes), units.FormatBytes(u.queuedBytes), units.FormatBytes(delta), units.FormatBytes(l.limitBytes))
	}
	return nil
}

// fairness is what the queue's order needs of the uids at one time: each
// queued uid's use, and per class the least use of a uid waiting in it.
type fairness struct {
	use      map[int]float64
	minUse   [3]float64
	now      time.Time
	agingDur time.Duration
}

// fairness takes the uids' use at now into s.fair (reused: the owner
// loop plans often, and one plan needs one); callers must not keep it.
func (s *state) fairness(now time.Time) *fairness {
	f := &s.fair
	if f.use == nil {
		f.use = map[int]float64{}
	}
	clear(f.use)
	f.now, f.agingDur = now, s.opts.Leases.Aging.D()
	f.minUse = [3]float64{math.Inf(1), math.Inf(1), math.Inf(1)}
	hl := s.halfLife()
	for uid, u := range s.uids {
		if u.waiting() == 0 {
			continue
		}
		use := u.useAt(now, hl)
		f.use[uid] = use
		for c, n := range u.queued {
			if n > 0 {
				f.minUse[c] = min(f.minUse[c], use)
			}
		}
	}
	return f
}

// clone copies f for a published frame.
func (f *fairness) clone() *fairness {
	c := *f
	c.use = maps.Clone(f.use)
	return &c
}

// effective is a request's priority at f's time: raised one class per
// [leases] aging interval waited, up to high, but never to above a higher
// class in which a uid that used less is waiting (there it stops at that
// class, where less use goes first).
func (f *fairness) effective(l *Lease) Priority {
	base := min(High, max(Low, l.Priority))
	eff := min(High, base+Priority(f.now.Sub(l.Created)/f.agingDur))
	use := f.use[l.Holder.UID]
	for c := base + 1; c < eff; c++ {
		if f.minUse[classOf(c)] < use {
			return c
		}
	}
	return eff
}

// compare orders two requests for dispatch: effective priority, then the
// uid's recent use (less first), then arrival.
func (f *fairness) compare(a, b *Lease, aSeq, bSeq uint64) int {
	if ea, eb := f.effective(a), f.effective(b); ea != eb {
		if ea > eb {
			return -1
		}
		return 1
	}
	if ua, ub := f.use[a.Holder.UID], f.use[b.Holder.UID]; ua != ub {
		if ua < ub {
			return -1
		}
		return 1
	}
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	switch {
	case aSeq < bSeq:
		return -1
	case aSeq > bSeq:
		return 1
	}
	return 0
}

// shareBytes is one active uid's fair share of the placeable GPUs' usable
// memory: memory held for a uid's starving requests stays within it.
func (s *state) shareBytes() int64 {
	return s.sumUsable / int64(max(1, s.activeUIDs))
}

// UIDUse is one uid's part of the machine as published: what it holds and
// waits for, its recent use next to its fair share.
type UIDUse struct {
	UID         int   `json:"uid"`
	Leases      int   `json:"leases"`
	Bytes       int64 `json:"bytes"`
	Queued      int   `json:"queued"`
	QueuedBytes int64 `json:"queued_bytes"`
	// HeldBytes is memory held for its requests that waited past [leases]
	// backfill_window (bounded by ShareBytes beyond its first).
	HeldBytes int64 `json:"held_bytes"`
	// UseGiBSeconds is its recent use: GiB·seconds of granted GPU memory,
	// decayed with [placement] fair_share_half_life; UseFraction is its
	// part of all uids' recent use (0 to 1).
	UseGiBSeconds float64 `json:"use_gib_seconds"`
	UseFraction   float64 `json:"use_fraction"`
	// Share is its fair share (1 / uids holding or waiting for GPU memory;
	// 0 when it does neither), ShareBytes that part of the placeable GPUs'
	// usable memory.
	Share      float64 `json:"share"`
	ShareBytes int64   `json:"share_bytes"`
}

// uidRow is one uid's counts as published.
type uidRow struct {
	uid int
	a   uidAcct
}

// uidFrame is the per-uid part of a published frame: immutable.
type uidFrame struct {
	rows      []uidRow // by uid
	active    int
	sumUsable int64
	halfLife  time.Duration
}

// uidFrame returns the uids to publish, copied only when they changed.
func (s *state) uidFrame() uidFrame {
	if s.uidsDirty || s.pubUIDs == nil {
		now, hl := s.now(), s.halfLife()
		rows := make([]uidRow, 0, len(s.uids))
		for uid, u := range s.uids {
			if u.leases == 0 && !u.active() && now.Sub(u.at) > hl && u.useAt(now, hl) < 1e-3 {
				delete(s.uids, uid) // idle for a half-life, its use gone: nothing to show or count
				continue
			}
			rows = append(rows, uidRow{uid: uid, a: *u})
		}
		slices.SortFunc(rows, func(a, b uidRow) int { return cmp.Compare(a.uid, b.uid) })
		s.pubUIDs, s.uidsDirty = rows, false
	}
	return uidFrame{rows: s.pubUIDs, active: s.activeUIDs, sumUsable: s.sumUsable, halfLife: s.halfLife()}
}

// uses computes each uid's use and share at now; heldBy (may be nil) is
// the memory held per uid.
func (f uidFrame) uses(now time.Time, heldBy map[int]int64) []UIDUse {
	out := make([]UIDUse, 0, len(f.rows))
	var total float64
	for _, r := range f.rows {
		u := UIDUse{UID: r.uid, Leases: r.a.leases, Bytes: r.a.bytes, Queued: r.a.waiting(), QueuedBytes: r.a.queuedBytes,
			HeldBytes: heldBy[r.uid], UseGiBSeconds: r.a.useAt(now, f.halfLife)}
		if r.a.active() {
			u.Share, u.ShareBytes = 1/float64(f.active), f.sumUsable/int64(f.active)
		}
		total += u.UseGiBSeconds
		out = append(out, u)
	}
	for i := range out {
		if total > 0 {
			out[i].UseFraction = out[i].UseGiBSeconds / total
		}
	}
	return out
}
