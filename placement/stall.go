package placement

import "time"

// A daemon stopped (SIGSTOP, a debugger, a frozen cgroup) for longer than a
// lease's remaining TTL must not expire the leases of holders that could not
// renew because it did not answer. The owner loop wakes at least every
// heartbeat while leases can expire; a wake-up that finds more than stallGap gone
// (on the monotonic clock) since the last one was a stall, and every
// scheduled expiry moves later by the stalled time. Holders that exited
// meanwhile are released by their exit reports, not by the TTL.
const (
	heartbeat = time.Second
	stallGap  = 2 * time.Second
)

// catchUp runs first at every wake-up of the owner loop.
func (s *state) catchUp() {
	now := time.Now() // monotonic: the stall, not a change of the wall clock
	last := s.lastWake
	s.lastWake = now
	if last.IsZero() {
		return
	}
	gap := now.Sub(last)
	if gap < stallGap || s.expiry.len() == 0 {
		return
	}
	var moved int
	for _, l := range s.leases {
		if l.Expires.IsZero() || !l.Active() {
			continue
		}
		l.Expires = l.Expires.Add(gap)
		s.expiry.set(l.ID, l.Expires)
		if s.journal != nil {
			c := l.clone()
			s.record(Change{Put: &c}, nil)
		}
		s.republish(l)
		moved++
	}
	s.log.Warn("the daemon was stalled (stopped or starved); lease TTLs get the stalled time back", "stalled", gap.Round(time.Millisecond), "leases", moved)
}
