package placement

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
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
// queued up (group commit). The owner loop only queues changes and numbers
// them; it never waits for the disk. Whoever needs a change durable — the
// caller a grant or renewal is answered to — commits it itself with sync:
// the first such caller commits everything queued (one fsync) while the
// others wait for it, the leader-based group commit of LevelDB's writers.
// So a grant costs no hand-over to another goroutine, and a release and the
// grant it enables share one commit.
//
// Changes nobody waits for (a release's deletion, an expiry, attributions)
// ride along with the next commit, or are committed by a timer within
// lingerDelay. A release or expiry is thus answered before its deletion is
// durable: a crash in that window brings the lease back at the next start if
// its holder still lives, until its TTL ends or the holder exits — memory
// is over-reserved for a while, never granted twice.
type journal struct {
	apply func([]Change) error

	mu         sync.Mutex
	queue      []journalEntry
	queued     uint64        // sequence number of the last change queued
	durable    uint64        // every change up to this one has been committed (or failed)
	failed     []failedSpan  // the latest failed commits, oldest first
	committing chan struct{} // closed when the commit under way ends; nil when none is
	linger     *time.Timer   // commits what nobody waits for; nil when not armed
	commits    atomic.Uint64 // Apply calls with at least one change
	changes    atomic.Uint64 // changes in them
}

// failedSpan is a commit that failed: the changes from..to and its error.
type failedSpan struct {
	from, to uint64
	err      error
}

// keepFailed bounds the failed commits remembered for late waiters.
const keepFailed = 64

type journalEntry struct {
	change Change
	done   func(error) // may be nil; runs on the committing goroutine
}

// lingerDelay bounds how long a change nobody waits for stays uncommitted.
const lingerDelay = 2 * time.Millisecond

func newJournal(store Store) *journal {
	j := &journal{}
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

// record buffers a change made in the current step of the owner loop and
// returns its sequence number, which sync takes; done (may be nil) runs with
// the commit's result. The step's changes go to the journal together when
// it settles, so a release and the grant it enables are in one commit.
func (s *state) record(c Change, done func(error)) uint64 {
	s.jbuf = append(s.jbuf, journalEntry{change: c, done: done})
	s.jseq++
	return s.jseq
}

// commitStep hands the step's buffered changes to the journal.
func (s *state) commitStep() {
	if s.journal == nil || len(s.jbuf) == 0 {
		return
	}
	s.journal.add(s.jbuf)
	clear(s.jbuf)
	s.jbuf = s.jbuf[:0]
}

// add queues entries (numbered after the ones before) and makes sure they
// are committed within lingerDelay even if nobody syncs them.
func (j *journal) add(es []journalEntry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.queue = append(j.queue, es...)
	j.queued += uint64(len(es))
	if j.linger == nil {
		j.linger = time.AfterFunc(lingerDelay, j.lingered)
	}
}

// lingered commits what is still queued when the linger timer fires.
func (j *journal) lingered() {
	j.mu.Lock()
	j.linger = nil
	pending := j.durable < j.queued
	j.mu.Unlock()
	if pending {
		_ = j.sync(context.Background(), 0)
	}
}

// sync returns once change seq is committed (0: everything queued so far),
// committing what is queued itself when no commit is under way, and returns
// the error of the commit that held seq. ctx ends only a wait for another
// goroutine's commit: a commit, once started, runs to its end.
func (j *journal) sync(ctx context.Context, seq uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if seq == 0 {
		seq = j.queued
	}
	for j.durable < seq {
		if j.committing == nil {
			j.commitLocked()
			continue
		}
		ch := j.committing
		j.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			j.mu.Lock()
			return ctx.Err()
		}
		j.mu.Lock()
	}
	for _, f := range j.failed {
		if f.from <= seq && seq <= f.to {
			return f.err
		}
	}
	return nil
}

// commitLocked commits everything queued in one Apply, with j.mu released
// while the store works; callers hold j.mu and see no commit under way.
func (j *journal) commitLocked() {
	batch, from, to := j.queue, j.durable+1, j.queued
	j.queue = nil
	done := make(chan struct{})
	j.committing = done
	if j.linger != nil && len(batch) > 0 {
		j.linger.Stop()
		j.linger = nil
	}
	j.mu.Unlock()
	err := j.applyBatch(batch)
	j.mu.Lock()
	j.durable, j.committing = to, nil
	if err != nil {
		j.failed = append(j.failed, failedSpan{from: from, to: to, err: err})
		if len(j.failed) > keepFailed {
			j.failed = j.failed[1:]
		}
	}
	close(done)
}

// applyBatch applies a batch's changes and tells each entry the outcome.
func (j *journal) applyBatch(batch []journalEntry) error {
	changes := make([]Change, 0, len(batch))
	for _, e := range batch {
		if e.change.Put != nil || e.change.Delete != "" {
			changes = append(changes, e.change)
		}
	}
	var err error
	if len(changes) > 0 {
		err = j.apply(changes)
		j.commits.Add(1)
		j.changes.Add(uint64(len(changes)))
	}
	for _, e := range batch {
		if e.done != nil {
			e.done(err)
		}
	}
	return err
}

// close commits what is queued and stops the linger timer.
func (j *journal) close() error {
	err := j.sync(context.Background(), 0)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.linger != nil {
		j.linger.Stop()
		j.linger = nil
	}
	return err
}
