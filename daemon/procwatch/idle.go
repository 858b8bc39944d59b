package procwatch

import (
	"slices"
	"time"
)

// idleSet is the unwatched PIDs whose pidfds the watcher keeps: at most
// idleMax of them (checked whenever one is added), none for longer than
// twice idleKeep (the watcher's loop sweeps them: see Watcher.sweepIdle). A process that releases its lease and takes another at once
// (a client's grant+release cycle) then costs no pidfd_open and no /proc
// read per lease; one that lives on without a lease holds a descriptor in
// the daemon for idleKeep at most, and no user can pile up more than
// idleMax of them.
type idleSet struct {
	since map[int]time.Time // pid → when it became idle
	order []idleEntry       // oldest first; entries for PIDs no longer idle are skipped
}

type idleEntry struct {
	pid int
	at  time.Time
}

const (
	idleMax  = 256
	idleKeep = 2 * time.Second
)

func newIdleSet() idleSet { return idleSet{since: map[int]time.Time{}} }

func (s *idleSet) has(pid int) bool {
	_, ok := s.since[pid]
	return ok
}

func (s *idleSet) remove(pid int) { delete(s.since, pid) }

// expired pops the PIDs idle for longer than idleKeep at now, and returns
// them with how long until the next one expires (−1: none is idle).
func (s *idleSet) expired(now time.Time) (evict []int, next time.Duration) {
	for len(s.order) > 0 {
		e := s.order[0]
		at, ok := s.since[e.pid]
		if ok && at.Equal(e.at) {
			if wait := idleKeep - now.Sub(at); wait > 0 {
				return evict, wait
			}
			delete(s.since, e.pid)
			evict = append(evict, e.pid)
		}
		s.order = s.order[1:]
	}
	return evict, -1
}

// add marks pid idle as of now and returns the PIDs to forget: those idle
// for longer than idleKeep, and the oldest beyond idleMax.
func (s *idleSet) add(pid int, now time.Time) (evict []int) {
	if _, ok := s.since[pid]; !ok {
		s.since[pid] = now
		s.order = append(s.order, idleEntry{pid: pid, at: now})
	}
	if len(s.order) > 4*idleMax { // mostly entries of PIDs watched again since
		s.order = s.order[:0:0]
		for p, at := range s.since {
			s.order = append(s.order, idleEntry{pid: p, at: at})
		}
		slices.SortFunc(s.order, func(a, b idleEntry) int { return a.at.Compare(b.at) })
	}
	for len(s.order) > 0 {
		e := s.order[0]
		at, ok := s.since[e.pid]
		switch {
		case !ok || !at.Equal(e.at): // no longer idle, or idle again since (a later entry)
		case len(s.since) > idleMax || now.Sub(at) > idleKeep:
			delete(s.since, e.pid)
			evict = append(evict, e.pid)
		default:
			return evict
		}
		s.order = s.order[1:]
	}
	return evict
}
