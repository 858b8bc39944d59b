package placement

import (
	"context"
	"sync"
)

// Change is one lease change to persist: Put stores a lease, Delete removes
// one by ID.
type Change struct {
	Put    *Lease
	Delete string
}

// BatchStore is a Store that applies several changes in one durable commit
// (one fsync). The engine uses it for group commit when the Store has it.
type BatchStore interface {
	Store
	Apply([]Change) error
}

// journal persists lease changes in order, as many per commit as have
// queued up while the previous commit ran (group commit). The owner loop
// adds changes without waiting; a grant is answered from done, after its
// commit, so no client ever holds a lease a restart would forget.
//
// A release or expiry is answered before its deletion is durable. A crash in
// that window brings the lease back at the next start if its holder still
// lives, until its TTL ends or the holder exits: memory is over-reserved for
// a while, never granted twice. Likewise a grant committed while the engine
// shuts down may be answered "stopped"; it is restored the same way.
type journal struct {
	apply func([]Change) error
	wake  chan struct{}

	mu    sync.Mutex
	queue []journalEntry
}

type journalEntry struct {
	change Change
	done   func(error)
}

func newJournal(store Store) *journal {
	j := &journal{wake: make(chan struct{}, 1)}
	if bs, ok := store.(BatchStore); ok {
		j.apply = bs.Apply
		return j
	}
	j.apply = func(cs []Change) error {
		for _, c := range cs {
			var err error
			if c.Put != nil {
				err = store.PutLease(*c.Put)
			} else if c.Delete != "" {
				err = store.DeleteLease(c.Delete)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return j
}

// record buffers a change made in the current step of the owner loop; done
// (may be nil) runs on the journal goroutine with the commit's result. The
// step's changes go to the journal together when it settles (or before a
// caller waits for a commit), so a release and the grant it enables are
// always in one commit.
func (s *state) record(c Change, done func(error)) {
	s.jbuf = append(s.jbuf, journalEntry{change: c, done: done})
}

// commitStep hands the step's buffered changes to the journal.
func (s *state) commitStep() {
	if s.journal == nil || len(s.jbuf) == 0 {
		return
	}
	s.journal.addEntries(s.jbuf)
	s.jbuf = nil
}

// addEntries queues entries to be committed in order, as many per Apply as
// have queued up.
func (j *journal) addEntries(es []journalEntry) {
	j.mu.Lock()
	j.queue = append(j.queue, es...)
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// run commits queued changes until ctx ends, then commits what is left.
func (j *journal) run(ctx context.Context) {
	for {
		select {
		case <-j.wake:
			j.flush()
		case <-ctx.Done():
			j.flush()
			return
		}
	}
}

func (j *journal) flush() {
	for {
		j.mu.Lock()
		batch := j.queue
		j.queue = nil
		j.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		changes := make([]Change, 0, len(batch))
		for _, e := range batch {
			if e.change.Put != nil || e.change.Delete != "" {
				changes = append(changes, e.change)
			}
		}
		var err error
		if len(changes) > 0 {
			err = j.apply(changes)
		}
		for _, e := range batch {
			if e.done != nil {
				e.done(err)
			}
		}
	}
}
