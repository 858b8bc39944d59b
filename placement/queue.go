package placement

import (
	"fmt"
	"time"

	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
)

// waiter is a request in the queue.
type waiter struct {
	lease    *Lease // state queued; Created is the time it arrived
	wait     time.Duration
	deadline time.Time
	reply    chan<- result
	seq      uint64
	pos      int    // index in its class list (waitq.go)
	key      string // its key in the published queue
}

// ordered returns the whole queue in dispatch order at now (see
// fairness.compare): effective priority, the uid's recent use, arrival.
func (s *state) ordered(now time.Time) []*waiter {
	var lists [3][]*waiter
	for c := range s.queue.classes {
		for _, w := range s.queue.classes[c].ws {
			if w != nil {
				lists[c] = append(lists[c], w)
			}
		}
	}
	return s.merged(lists, s.fairness(now))
}

// plan walks the queue in order and decides, against the current accounts,
// which waiters can be granted where (backfill: a later, smaller request may
// pass a blocked one) and how much memory is held per GPU for blocked
// waiters that have waited past [leases] backfill_window (reservation: the
// stream of small requests cannot starve a large one). heldOn names, per
// waiter lease ID, the GPU holding memory for it.
//
// Only the waiters that can matter are visited: those past the backfill
// window, and the others no larger than the most memory available on any
// GPU (the rest can neither be granted nor hold memory).
//
// Memory is held only where the waiter could fit once every lease there
// ended (usable − foreign), and, beyond a uid's first hold, only while the
// uid's holds stay within its fair share (shareBytes): requests that can
// never fit, or one uid's many, cannot take memory from everyone else.
func (s *state) plan(now time.Time) (grants []planned, hold map[string]int64, heldOn map[string]string) {
	if s.queue.len() == 0 {
		return nil, nil, nil // nil maps read as empty
	}
	accounts := s.accounts()
	room := int64(0)
	if a, ok := s.gtree.top(); ok {
		room = a.AvailableBytes
	}
	cutoff := now.Add(-s.opts.Leases.BackfillWindow.D())
	var lists [3][]*waiter
	for c := range s.queue.classes {
		lists[c] = s.queue.classes[c].candidates(cutoff, room, nil)
	}
	var taken map[string]int64 // planned grants per GPU
	var heldBy map[int]int64   // holds per uid
	share := s.shareBytes()
	for _, w := range s.merged(lists, s.fairness(now)) {
		if a, ok := s.pick(w, accounts, taken, hold); ok {
			grants = append(grants, planned{w: w, acc: *a})
			if taken == nil {
				taken = map[string]int64{}
			}
			taken[a.UUID] += w.lease.Bytes // exact: leased and unrealized both grow
			continue
		}
		uid := w.lease.Holder.UID
		if now.Sub(w.lease.Created) < s.opts.Leases.BackfillWindow.D() || (heldBy[uid] > 0 && heldBy[uid]+w.lease.Bytes > share) {
			continue
		}
		if target, ok := s.reserveTarget(w, accounts, taken, hold); ok {
			if hold == nil {
				hold, heldOn, heldBy = map[string]int64{}, map[string]string{}, map[int]int64{}
			}
			hold[target] += w.lease.Bytes
			heldOn[w.lease.ID] = target
			heldBy[uid] += w.lease.Bytes
		}
	}
	return grants, hold, heldOn
}

// pick chooses w's GPU by policy among the allowed accounts, with the
// memory planned for earlier waiters (taken) and held taken off.
func (s *state) pick(w *waiter, accounts []Account, taken, hold map[string]int64) (*Account, bool) {
	need, pol := w.lease.Bytes, s.opts.Placement.Policy
	if pol == PolicySpread && w.lease.Device.Kind == device.Auto && len(taken) == 0 && len(hold) == 0 {
		a, ok := s.gtree.top() // the spread pick, unless nothing fits
		return a, ok && a.AvailableBytes >= need
	}
	var best *Account
	var bestAvail int64
	s.eachAllowed(w, accounts, func(a *Account) {
		avail := a.AvailableBytes - taken[a.UUID] - hold[a.UUID]
		if !a.Placeable || avail < need || avail <= 0 {
			return
		}
		if best == nil || better(pol, s.opts.Placement.Score, w.lease.Priority, a, avail, best, bestAvail) {
			best, bestAvail = a, avail
		}
	})
	return best, best != nil
}

// eachAllowed calls f for the accounts w may be placed on: the one GPU it
// pins, or all.
func (s *state) eachAllowed(w *waiter, accounts []Account, f func(*Account)) {
	switch spec := w.lease.Device; spec.Kind {
	case device.UUID:
		if a, ok := s.accountOf(spec.UUID); ok {
			f(a)
		}
	case device.Index:
		if i, ok := s.byIndex[spec.Index]; ok {
			f(&accounts[i])
		}
	default:
		for i := range accounts {
			f(&accounts[i])
		}
	}
}

type planned struct {
	w   *waiter
	acc Account
}

// reserveTarget picks the GPU to hold memory on for a starving waiter: the
// placeable one where it fits once the leases there end (usable − foreign)
// and that is closest to fitting it now.
func (s *state) reserveTarget(w *waiter, accounts []Account, taken, hold map[string]int64) (string, bool) {
	var best *Account
	var bestAvail int64
	s.eachAllowed(w, accounts, func(a *Account) {
		if !a.Placeable || a.UsableBytes-a.ForeignBytes < w.lease.Bytes {
			return
		}
		avail := a.AvailableBytes - taken[a.UUID] - hold[a.UUID]
		if best == nil || avail > bestAvail {
			best, bestAvail = a, avail
		}
	})
	if best == nil {
		return "", false
	}
	return best.UUID, true
}

// dispatch grants every waiter that fits now. It runs after every change
// that can free memory or reorder the queue: there is no polling.
func (s *state) dispatch() {
	if s.queue.len() == 0 {
		return
	}
	if err := s.fresh(); err != nil {
		return
	}
	grants, _, heldOn := s.plan(s.now())
	for _, g := range grants {
		s.grant(g.w, g.acc)
	}
	s.reclaim(heldOn)
	s.reclaimBorrowed()
}

// noFit explains why a request cannot be granted now, naming the memory
// held for other waiting requests where that is in the way.
func (s *state) noFit(w *waiter) error {
	_, hold, heldOn := s.plan(s.now())
	best, at, held, allHeld := int64(0), -1, int64(0), int64(0)
	accts := s.accounts()
	for i := range accts {
		a := &accts[i]
		if !allowed(w.lease.Device, a) || !a.Placeable {
			continue
		}
		h := hold[a.UUID]
		if heldOn[w.lease.ID] == a.UUID {
			h -= w.lease.Bytes // its own hold is not in its way
		}
		allHeld += h
		if a.AvailableBytes-h > best {
			best, at, held = a.AvailableBytes-h, a.Index, h
		}
	}
	where := ""
	switch {
	case at >= 0 && held > 0:
		where = fmt.Sprintf(" (GPU %d; %s more held there for other waiting requests)", at, units.FormatBytes(held))
	case at >= 0:
		where = fmt.Sprintf(" (GPU %d)", at)
	case allHeld > 0:
		where = fmt.Sprintf(" (%s held for other waiting requests)", units.FormatBytes(allHeld))
	}
	return fmt.Errorf("%w: %s requested on %s, at most %s available%s", ErrNoFit,
		units.FormatBytes(w.lease.Bytes), w.lease.Device, units.FormatBytes(best), where)
}

// enqueue adds a waiter to the queue and schedules its deadline.
func (s *state) enqueue(w *waiter) {
	s.queue.add(w)
	s.uidQueued(w, 1)
	s.deadlines.set(w, w.deadline)
	s.markChanged()
}

func (s *state) removeWaiter(w *waiter) {
	if s.queue.byID[w.lease.ID] == w {
		s.queue.remove(w)
		s.uidQueued(w, -1)
		s.deadlines.remove(w)
		s.markChanged()
	}
}

func (s *state) findWaiter(id string) *waiter { return s.queue.byID[id] }

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
	for {
		id, at, ok := s.expiry.next()
		if !ok || at.After(now) {
			break
		}
		s.expiry.remove(id)
		if l, ok := s.leases[id]; ok {
			s.end(l, StateExpired, fmt.Sprintf("not renewed within its %s TTL", l.TTL))
			changed = true
		}
	}
	for {
		w, at, ok := s.deadlines.next()
		if !ok || at.After(now) {
			break
		}
		s.deadlines.remove(w)
		if w.wait > 0 {
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
	_, next, ok := s.expiry.next()
	if _, d, wok := s.deadlines.next(); wok && (!ok || d.Before(next)) {
		next, ok = d, true
	}
	if !ok {
		t.Reset(time.Hour)
		return
	}
	d := max(0, next.Sub(s.now()))
	if s.expiry.len() > 0 {
		d = min(d, heartbeat) // so a stall is told from idling (catchUp)
	}
	t.Reset(d)
}
