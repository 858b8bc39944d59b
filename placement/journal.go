package placement

import (
	"context"
	"fmt"
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
	queued     uint64         // sequence number of the last change queued
	durable    uint64         // every change up to this one has been committed (or failed)
	failed     []failedSpan   // the latest failed commits, oldest first
	committing chan struct{}  // closed when the commit under way ends; nil when none is
	linger     *time.Timer    // commits what nobody waits for; nil when not armed
	redo       []journalEntry // deletions to retry (requeue)
	retry      *time.Timer    // commits redo; nil when not armed
	retryWait  time.Duration  // the retry timer's current pause
	commits    atomic.Uint64  // Apply calls with at least one change
	changes    atomic.Uint64  // changes in them
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

// commitLocked commits everything queued (and the deletions to retry) in
// one Apply, with j.mu released while the store works; callers hold j.mu
// and see no commit under way.
func (j *journal) commitLocked() {
	redo, batch, from, to := j.redo, j.queue, j.durable+1, j.queued
	j.redo, j.queue = nil, nil
	done := make(chan struct{})
	j.committing = done
	if j.linger != nil && len(batch) > 0 {
		j.linger.Stop()
		j.linger = nil
	}
	j.mu.Unlock()
	errs := j.applyBatch(append(redo, batch...))
	j.mu.Lock()
	j.durable, j.committing = to, nil
	var retry []journalEntry
	for i, err := range errs {
		if err == nil {
			continue
		}
		e := append(redo, batch...)[i]
		if e.change.Delete != "" {
			retry = append(retry, journalEntry{change: e.change})
		}
		if i < len(redo) {
			continue // nobody waits for a retried deletion
		}
		seq := from + uint64(i-len(redo))
		if n := len(j.failed); n > 0 && j.failed[n-1].to == seq-1 && j.failed[n-1].err == err {
			j.failed[n-1].to = seq
		} else {
			j.failed = append(j.failed, failedSpan{from: seq, to: seq, err: err})
		}
	}
	if len(j.failed) > keepFailed {
		j.failed = j.failed[len(j.failed)-keepFailed:]
	}
	j.requeue(retry)
	close(done)
}

// Deletions that could not be written (a full disk, an I/O error) are
// retried until they are: the lease is gone from the engine, and its record
// must not bring it back at the next start. They are kept apart from the
// numbered queue (nobody waits for them) and committed with the next
// commit or by the retry timer, which waits retryFirst, doubled up to
// retryMax.
const (
	retryFirst = 10 * time.Millisecond
	retryMax   = time.Second
)

// requeue keeps failed deletions for the next commit and arms the retry
// timer; callers hold j.mu.
func (j *journal) requeue(es []journalEntry) {
	if len(es) == 0 {
		j.retryWait = 0
		return
	}
	j.redo = append(j.redo, es...)
	j.retryWait = min(max(2*j.retryWait, retryFirst), retryMax)
	if j.retry == nil {
		j.retry = time.AfterFunc(j.retryWait, j.flushRedo)
	}
}

// flushRedo commits the deletions kept for a retry (and whatever is
// queued), unless a commit under way takes them.
func (j *journal) flushRedo() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.retry = nil
	switch {
	case j.committing == nil && (len(j.redo) > 0 || j.durable < j.queued):
		j.commitLocked()
	case j.committing != nil && len(j.redo) > 0: // the commit under way does not have them
		j.retry = time.AfterFunc(retryFirst, j.flushRedo)
	}
}

// applyBatch applies a batch's changes, tells each entry the outcome and
// returns each entry's error. When a batch with grants fails, its
// deletions are tried again alone: they need no new space (the store keeps
// room for them), and a grant that cannot be written must not keep a
// release from being written.
func (j *journal) applyBatch(batch []journalEntry) []error {
	changes := make([]Change, 0, len(batch))
	var dels []Change
	for _, e := range batch {
		if e.change.Put != nil || e.change.Delete != "" {
			changes = append(changes, e.change)
		}
		if e.change.Delete != "" {
			dels = append(dels, e.change)
		}
	}
	var err, delErr error
	if len(changes) > 0 {
		err = j.apply(changes)
		j.commits.Add(1)
		j.changes.Add(uint64(len(changes)))
		delErr = err
		if err != nil && len(dels) > 0 && len(dels) < len(changes) {
			delErr = j.apply(dels)
		}
	}
	errs := make([]error, len(batch))
	for i, e := range batch {
		errs[i] = err
		if e.change.Delete != "" {
			errs[i] = delErr
		}
		if e.done != nil {
			e.done(errs[i])
		}
	}
	return errs
}

// close commits what is queued, retrying deletions that fail for up to
// closeRetry, and stops the timers.
func (j *journal) close() error {
	deadline := time.Now().Add(closeRetry)
	err := j.sync(context.Background(), 0)
	for {
		j.mu.Lock()
		left := len(j.redo)
		j.mu.Unlock()
		if left == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(retryFirst)
		j.flushRedo()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, t := range []**time.Timer{&j.linger, &j.retry} {
		if *t != nil {
			(*t).Stop()
			*t = nil
		}
	}
	if n := len(j.redo); n > 0 {
		return fmt.Errorf("%d lease deletions could not be written: %w", n, err)
	}
	return err
}

// closeRetry bounds how long a stopping engine retries deletions.
const closeRetry = 3 * time.Second

// deliver answers a grant once it is durable: this goroutine commits it,
// with whatever else is queued, unless a commit under way has it. The wait
// does not end with ctx (a commit, once started, runs to its end): a
// caller told that its grant failed must not leave the lease behind. A
// grant whose commit failed, or whose caller went away meanwhile, is taken
// back, durably, before the error is returned.
func (e *Engine) deliver(ctx context.Context, id string, r result) (Lease, error) {
	if r.err != nil || r.seq == 0 {
		return r.lease, r.err
	}
	if err := e.st.journal.sync(context.WithoutCancel(ctx), r.seq); err != nil {
		e.takeBack(id)
		return Lease{}, fmt.Errorf("persist lease: %w", err)
	}
	if err := ctx.Err(); err != nil {
		e.takeBack(id)
		return Lease{}, fmt.Errorf("%w: %w", ErrCancelled, err)
	}
	return r.lease, nil
}

// takeBack withdraws request id (a waiter, or a grant its caller will not
// get) and makes the deletion durable before returning. When the owner
// loop has stopped, the deletion goes to the journal directly: a grant the
// loop made before it stopped may have been committed.
func (e *Engine) takeBack(id string) {
	j := e.st.journal
	if err := e.do(context.Background(), func(s *state) { s.withdraw(id) }); err != nil && j != nil {
		j.mu.Lock()
		j.redo = append(j.redo, journalEntry{change: Change{Delete: id}})
		j.mu.Unlock()
		for deadline := time.Now().Add(closeRetry); ; time.Sleep(retryFirst) { // until written, or the store gives up
			j.flushRedo()
			j.mu.Lock()
			left := len(j.redo) > 0 || j.committing != nil
			j.mu.Unlock()
			if !left || time.Now().After(deadline) {
				break
			}
		}
	}
	if j != nil {
		_ = j.sync(context.Background(), 0)
	}
}
