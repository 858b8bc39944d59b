package placement

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/wsched/wsched/internal/units"
)

func (s *state) release(id, reason string) (Lease, error) {
	if w := s.findWaiter(id); w != nil {
		s.reject(w, fmt.Errorf("%w: %s", ErrCancelled, reason))
		s.dispatch()
		return w.lease.clone(), nil
	}
	if l, ok := s.leases[id]; ok {
		s.end(l, StateReleased, reason)
		s.opSeq = s.jseq // answered once its deletion is durable (Engine.call): a release never comes back
		s.dispatch()
		return l.clone(), nil
	}
	if l, ok := s.ended[id]; ok {
		return l.clone(), nil // idempotent
	}
	return Lease{}, fmt.Errorf("%w: %s", ErrNotFound, id)
}

// active returns the granted lease id, or why there is none.
func (s *state) active(id string) (*Lease, error) {
	if l, ok := s.leases[id]; ok {
		return l, nil
	}
	if l, ok := s.ended[id]; ok {
		return nil, fmt.Errorf("%w: %s is %s", ErrEnded, id, l.State)
	}
	if s.findWaiter(id) != nil {
		return nil, fmt.Errorf("%w: %s is still queued", ErrInvalid, id)
	}
	return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
}

func (s *state) renew(id string, ttl time.Duration) (Lease, error) {
	l, err := s.active(id)
	if err != nil {
		return Lease{}, err
	}
	if ttl < 0 || ttl > s.opts.Leases.MaxTTL.D() {
		return Lease{}, fmt.Errorf("%w: ttl %s: want 0 to [leases] max_ttl %s", ErrInvalid, ttl, s.opts.Leases.MaxTTL)
	}
	if ttl == 0 {
		ttl = l.TTL
	}
	prevTTL, prevExpires := l.TTL, l.Expires
	l.TTL, l.Expires = ttl, s.now().Add(ttl)
	expires := l.Expires
	s.persistAsync(l, func(s *state) { // the commit failed: the renewal did not happen
		if cur, ok := s.leases[l.ID]; ok && cur == l && l.Expires.Equal(expires) {
			l.TTL, l.Expires = prevTTL, prevExpires
			s.expiry.set(l.ID, l.Expires)
			s.republish(l)
		}
	})
	s.expiry.set(l.ID, l.Expires)
	s.republish(l)
	s.emit(EventRenewed, l, "")
	return l.clone(), nil
}

// persistAsync records a changed lease for the caller to wait for outside
// the owner loop (Engine.call commits it before answering: renewals,
// resizes and added PIDs are answered only once durable). undo (may be nil) runs on the
// owner loop when the commit fails.
func (s *state) persistAsync(l *Lease, undo func(*state)) {
	if s.journal == nil {
		return
	}
	c := l.clone()
	later := s.later
	s.opSeq = s.record(Change{Put: &c}, func(err error) {
		if err != nil && undo != nil {
			later(undo)
		}
	})
}

func (s *state) resize(id string, bytes int64) (Lease, error) {
	l, err := s.active(id)
	if err != nil {
		return Lease{}, err
	}
	if bytes <= 0 {
		return Lease{}, fmt.Errorf("%w: memory_bytes must be above 0", ErrInvalid)
	}
	delta := bytes - l.Bytes
	if delta == 0 { // no resize: no max_bytes (its peak is still one size's), commit or event
		return l.clone(), nil
	}
	if delta > 0 && l.GPU != CPU {
		if err := s.admitGrowth(l, delta); err != nil {
			return Lease{}, err
		}
		if err := s.fresh(); err != nil {
			return Lease{}, err
		}
		_, hold, _ := s.plan(s.now())
		if a, ok := s.accountOf(l.GPU); ok && a.AvailableBytes-hold[a.UUID] < delta {
			return Lease{}, fmt.Errorf("%w: growing by %s, %s available on GPU %d", ErrNoFit,
				units.FormatBytes(delta), units.FormatBytes(max(0, a.AvailableBytes-hold[a.UUID])), a.Index)
		}
	}
	prev, prevMax := l.Bytes, l.MaxBytes
	s.change(l, func() { l.Bytes, l.MaxBytes = bytes, max(l.MaxBytes, prev, bytes) })
	// Committed outside the owner loop, like a grant (Engine.call waits for
	// it before answering). A growth whose commit fails is undone; a shrink
	// stays (the stored size is then the larger one: memory over-reserved
	// after a restart, never granted twice).
	var undo func(*state)
	if delta > 0 {
		undo = func(s *state) {
			if cur, ok := s.leases[l.ID]; ok && cur == l && l.Bytes == bytes {
				s.change(l, func() { l.Bytes, l.MaxBytes = prev, prevMax })
				s.dispatch()
			}
		}
	}
	s.persistAsync(l, undo)
	s.emit(EventResized, l, fmt.Sprintf("%s → %s", units.FormatBytes(prev), units.FormatBytes(bytes)))
	if delta < 0 {
		s.dispatch()
	}
	return l.clone(), nil
}

func (s *state) get(id string) (Lease, error) {
	if l, ok := s.leases[id]; ok {
		return l.clone(), nil
	}
	if w := s.findWaiter(id); w != nil {
		return w.lease.clone(), nil
	}
	if l, ok := s.ended[id]; ok {
		return l.clone(), nil
	}
	return Lease{}, fmt.Errorf("%w: %s", ErrNotFound, id)
}

func (s *state) addPID(id string, pid int) (Lease, error) { return s.addProcess(id, pid, 0) }

// addProcess adds pid to lease id, with its start time when known (0: not),
// stored so that a restart does not count a reused PID against the lease.
func (s *state) addProcess(id string, pid int, startTicks uint64) (Lease, error) {
	l, err := s.active(id)
	if err != nil {
		return Lease{}, err
	}
	if pid <= 0 {
		return Lease{}, fmt.Errorf("%w: pid must be above 0", ErrInvalid)
	}
	if !slices.Contains(l.pids(), pid) {
		s.change(l, func() {
			l.PIDs = append(l.PIDs, pid)
			if startTicks != 0 {
				if l.PIDStarts == nil {
					l.PIDStarts = map[int]uint64{}
				}
				l.PIDStarts[pid] = startTicks
			}
		})
		s.persistAsync(l, func(s *state) { // the commit failed: the PID was not added
			if cur, ok := s.leases[l.ID]; ok && cur == l && slices.Contains(l.PIDs, pid) {
				s.change(l, func() { dropPID(l, pid) })
			}
		})
	}
	return l.clone(), nil
}

// dropPID removes pid (and its start time) from l's PIDs.
func dropPID(l *Lease, pid int) {
	l.PIDs = slices.DeleteFunc(l.PIDs, func(p int) bool { return p == pid })
	delete(l.PIDStarts, pid)
}

func (s *state) removePID(id string, pid int) (Lease, error) {
	l, err := s.active(id)
	if err != nil {
		return Lease{}, err
	}
	s.change(l, func() { dropPID(l, pid) })
	s.stale = true
	s.persistAsync(l, nil) // kept in memory even if the commit fails: the PID exited
	return l.clone(), nil
}

// holderExited releases the leases of a dead process and withdraws its
// waiting requests.
func (s *state) holderExited(pid int) []Lease {
	var out []Lease
	for _, w := range s.queue.all() {
		if w.lease.Holder.PID == pid {
			s.reject(w, fmt.Errorf("%w: holder (pid %d) exited", ErrCancelled, pid))
		}
	}
	for _, l := range slices.Collect(maps.Keys(s.owners[pid])) { // the leases listing pid
		if l.Holder.PID == pid {
			s.end(l, StateReleased, fmt.Sprintf("holder (pid %d) exited", pid))
			out = append(out, l.clone())
		} else if slices.Contains(l.PIDs, pid) {
			s.change(l, func() { dropPID(l, pid) })
			s.stale = true
		}
	}
	s.dispatch()
	return out
}

func (s *state) restore(leases []Lease) {
	if len(leases) > 0 {
		s.log.Info("leases restored", "count", len(leases))
	}
	s.bulk = map[string][]*tnode{}
	debug := s.log.Enabled(context.Background(), slog.LevelDebug)
	defer s.publishBulk()
	for i := range leases {
		c := &leases[i] // the caller hands the leases over
		c.State = StateGranted
		s.addLease(c)
		if c.UsedBytes > 0 || c.Overrun {
			s.measured[c] = struct{}{} // cleared by the next reconcile unless measured
		}
		if debug {
			s.log.Debug("lease restored", "lease", c.ID, "gpu", c.GPUIndex, "bytes", c.Bytes, "holder", c.Holder.PID)
		}
	}
}

func (s *state) subscribe(ch chan Event, types []EventType) int {
	s.nextSub++
	s.subs[s.nextSub] = &subscriber{ch: ch, types: types}
	return s.nextSub
}

func (s *state) unsubscribe(id int) {
	if sub, ok := s.subs[id]; ok {
		close(sub.ch)
		delete(s.subs, id)
	}
}

func (s *state) shutdown() {
	for _, w := range s.queue.all() {
		s.reject(w, ErrStopped)
	}
	for id := range s.subs {
		s.unsubscribe(id)
	}
}
