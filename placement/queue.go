package placement

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"time"

	"github.com/wsched/wsched/internal/units"
)

// waiter is a request in the queue.
type waiter struct {
	lease    *Lease // state queued; Created is the time it arrived
	wait     time.Duration
	deadline time.Time
	reply    chan<- result
	seq      uint64
}

// effective is the waiter's priority raised by one class per [leases] aging
// interval waited, up to high: low priority cannot starve.
func (s *state) effective(w *waiter, now time.Time) Priority {
	steps := Priority(now.Sub(w.lease.Created) / s.opts.Leases.Aging.D())
	return min(High, w.lease.Priority+steps)
}

// ordered returns the queue in dispatch order: effective priority, then
// arrival (FIFO within a class).
func (s *state) ordered(now time.Time) []*waiter {
	q := slices.Clone(s.queue)
	slices.SortStableFunc(q, func(a, b *waiter) int {
		return cmp.Or(
			cmp.Compare(s.effective(b, now), s.effective(a, now)),
			a.lease.Created.Compare(b.lease.Created),
			cmp.Compare(a.seq, b.seq),
		)
	})
	return q
}

// plan walks the queue in order and decides, against the current accounts,
// which waiters can be granted where (backfill: a later, smaller request may
// pass a blocked one) and how much memory is held per GPU for blocked
// waiters that have waited past [leases] backfill_window (reservation: the
// stream of small requests cannot starve a large one). heldOn names, per
// waiter lease ID, the GPU holding memory for it.
func (s *state) plan(now time.Time) (grants []planned, hold map[string]int64, heldOn map[string]string) {
	accounts := slices.Clone(s.accounts())
	hold, heldOn = map[string]int64{}, map[string]string{}
	for _, w := range s.ordered(now) {
		var fits []Account
		for _, a := range accounts {
			if allowed(w.lease.Device, a) {
				a.AvailableBytes -= hold[a.UUID]
				fits = append(fits, a)
			}
		}
		if a, ok := Pick(s.opts.Placement.Policy, s.opts.Placement.Score, fits, w.lease.Bytes, w.lease.Priority); ok {
			grants = append(grants, planned{w: w, acc: a})
			for i := range accounts {
				if accounts[i].UUID == a.UUID {
					accounts[i].AvailableBytes -= w.lease.Bytes // exact: leased and unrealized both grow
				}
			}
			continue
		}
		if now.Sub(w.lease.Created) >= s.opts.Leases.BackfillWindow.D() {
			if target, ok := reserveTarget(fits, w.lease.Bytes); ok {
				hold[target] += w.lease.Bytes
				heldOn[w.lease.ID] = target
			}
		}
	}
	return grants, hold, heldOn
}

type planned struct {
	w   *waiter
	acc Account
}

// reserveTarget picks the GPU to hold memory on for a starving waiter: the
// placeable one that could hold it and is closest to fitting it now.
func reserveTarget(fits []Account, need int64) (string, bool) {
	var best *Account
	for i := range fits {
		a := &fits[i]
		if !a.Placeable || a.UsableBytes < need {
			continue
		}
		if best == nil || a.AvailableBytes > best.AvailableBytes {
			best = a
		}
	}
	if best == nil {
		return "", false
	}
	return best.UUID, true
}

// dispatch grants every waiter that fits now. It runs after every change
// that can free memory or reorder the queue: there is no polling.
func (s *state) dispatch() {
	if len(s.queue) == 0 {
		return
	}
	if err := s.fresh(); err != nil {
		return
	}
	grants, hold, _ := s.plan(s.now())
	for _, g := range grants {
		s.grant(g.w, g.acc)
	}
	s.reclaim(hold)
}

// noFit explains why a request cannot be granted now.
func (s *state) noFit(w *waiter) error {
	_, hold, _ := s.plan(s.now())
	best, at := int64(0), -1
	for _, a := range s.accounts() {
		if allowed(w.lease.Device, a) && a.Placeable && a.AvailableBytes-hold[a.UUID] > best {
			best, at = a.AvailableBytes-hold[a.UUID], a.Index
		}
	}
	where := ""
	if at >= 0 {
		where = fmt.Sprintf(" (GPU %d)", at)
	}
	return fmt.Errorf("%w: %s requested on %s, at most %s available%s", ErrNoFit,
		units.FormatBytes(w.lease.Bytes), w.lease.Device, units.FormatBytes(best), where)
}

func (s *state) removeWaiter(w *waiter) {
	s.queue = slices.DeleteFunc(s.queue, func(x *waiter) bool { return x == w })
}

func (s *state) findWaiter(id string) *waiter {
	for _, w := range s.queue {
		if w.lease.ID == id {
			return w
		}
	}
	return nil
}

// withdraw handles a requester that went away: a queued request is
// cancelled, a grant it never received is released.
func (s *state) withdraw(id string) {
	if w := s.findWaiter(id); w != nil {
		s.reject(w, fmt.Errorf("%w: the requester went away", ErrCancelled))
		s.dispatch()
		return
	}
	if l, ok := s.leases[id]; ok {
		s.end(l, StateReleased, "the requester went away before the grant was delivered")
		s.dispatch()
	}
}

// tick ends expired leases and timed-out waiters, then dispatches.
func (s *state) tick() {
	now := s.now()
	changed := false
	for s.expiry.Len() > 0 && !s.expiry[0].at.After(now) {
		it := heap.Pop(&s.expiry).(expiryItem)
		if l, ok := s.leases[it.id]; ok && !l.Expires.After(now) {
			s.end(l, StateExpired, fmt.Sprintf("not renewed within its %s TTL", l.TTL))
			changed = true
		}
	}
	for _, w := range slices.Clone(s.queue) {
		if w.wait > 0 && !w.deadline.After(now) {
			err := s.noFit(w)
			s.reject(w, fmt.Errorf("%w after %s: %w", ErrTimeout, w.wait, err))
			changed = true
		}
	}
	if changed {
		s.dispatch()
	}
}

// rearm sets the timer to the next lease expiry or waiter deadline.
func (s *state) rearm(t *time.Timer) {
	var next time.Time
	if s.expiry.Len() > 0 {
		next = s.expiry[0].at
	}
	for _, w := range s.queue {
		if next.IsZero() || w.deadline.Before(next) {
			next = w.deadline
		}
	}
	if next.IsZero() {
		t.Reset(time.Hour)
		return
	}
	t.Reset(max(0, next.Sub(s.now())))
}
