package placement

import (
	"context"
	"slices"
	"time"
)

// EventType names a state change.
type EventType string

// Event types: every state change of a request or lease.
const (
	EventRequested EventType = "requested"
	EventQueued    EventType = "queued"
	EventGranted   EventType = "granted"
	EventRenewed   EventType = "renewed"
	EventResized   EventType = "resized"
	EventReleased  EventType = "released"
	EventExpired   EventType = "expired"
	EventRejected  EventType = "rejected"
	EventOverrun   EventType = "overrun"
	// EventReclaim asks the holder of a reclaimable lease to release it: a
	// request waits for its memory.
	EventReclaim EventType = "reclaim"
)

// Event is one state change, with the lease as it was after the change.
type Event struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Type   EventType `json:"type"`
	Lease  Lease     `json:"lease"`
	Reason string    `json:"reason,omitempty"`
	// Unheld lists, for a released or expired lease, its processes that
	// hold no other lease now (the daemon may stop watching them).
	Unheld []int `json:"unheld,omitempty"`
}

// subscriberBuffer is how many events a subscriber may fall behind before it
// is dropped (its channel closed) rather than stall the engine.
const subscriberBuffer = 1024

type subscriber struct {
	ch    chan Event
	types []EventType // nil: every type
}

func (sub *subscriber) wants(t EventType) bool {
	return sub.types == nil || slices.Contains(sub.types, t)
}

// emit stamps and fans out an event. Slow subscribers are closed, never
// waited for: the owner loop must not block on a reader.
func (s *state) emit(t EventType, l *Lease, reason string) {
	s.emitEvent(Event{Type: t, Reason: reason}, l)
}

// emitEvent stamps ev with l (copied once, and only when a subscriber
// wants the event) and fans it out.
func (s *state) emitEvent(ev Event, l *Lease) {
	s.seq++
	s.markChanged()
	s.stats.count(ev.Type)
	stamped := false
	for id, sub := range s.subs {
		if !sub.wants(ev.Type) {
			continue
		}
		if !stamped {
			ev.Seq, ev.Time, ev.Lease, stamped = s.seq, s.now(), l.clone(), true
		}
		select {
		case sub.ch <- ev:
		default:
			close(sub.ch)
			delete(s.subs, id)
			s.log.Warn("event subscriber fell behind; dropped", "subscriber", id)
		}
	}
}

// Stats are cumulative counters of the engine.
type Stats struct {
	Requests   uint64 `json:"requests"`
	Grants     uint64 `json:"grants"`
	Rejections uint64 `json:"rejections"`
	Releases   uint64 `json:"releases"`
	Expiries   uint64 `json:"expiries"`
	Overruns   uint64 `json:"overruns"`
	Renewals   uint64 `json:"renewals"`
	// Commits counts the lease journal's durable commits (fsyncs), and
	// CommittedChanges the lease changes in them (group commit: the
	// ratio is the changes per fsync).
	Commits          uint64 `json:"journal_commits"`
	CommittedChanges uint64 `json:"journal_changes"`
}

func (st *Stats) count(t EventType) {
	switch t {
	case EventRequested:
		st.Requests++
	case EventGranted:
		st.Grants++
	case EventRejected:
		st.Rejections++
	case EventReleased:
		st.Releases++
	case EventExpired:
		st.Expiries++
	case EventOverrun:
		st.Overruns++
	case EventRenewed:
		st.Renewals++
	}
}

// Follow calls f with each event of a subscription until ctx ends or the
// channel is closed (the engine dropped a subscriber that fell behind, or
// stopped). The caller still cancels the subscription.
func Follow(ctx context.Context, events <-chan Event, f func(Event)) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			f(ev)
		}
	}
}
