package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wsched/wsched/jobs/transcript"
)

func (s *mstate) now() time.Time { return s.m.now() }

// persist stores a job; a failure is logged (the job goes on in memory).
func (s *mstate) persist(e *entry) {
	if s.m.store == nil {
		return
	}
	if err := s.m.store.PutJob(e.job.clone()); err != nil {
		s.m.log.Error("cannot persist job", "job", e.job.ID, "err", err)
	}
}

func (s *mstate) submit(spec Spec) (Job, error) {
	if err := s.admit(spec.Owner.UID); err != nil {
		return Job{}, err
	}
	now := s.now()
	e := &entry{job: Job{ID: newID(), Spec: spec, State: Pending, Created: now, GPUIndex: -1,
		Timings: map[State]Timing{Pending: {Entered: now}}, History: []StateChange{{State: Pending, Time: now}}}, subs: map[int]chan Event{}}
	if s.m.store != nil {
		if err := s.m.store.PutJob(e.job.clone()); err != nil {
			return Job{}, fmt.Errorf("persist job: %w", err)
		}
	}
	s.add(e)
	s.pending = append(s.pending, e)
	s.m.log.Info("job queued", "job", e.job.ID, "model", spec.Model, "priority", spec.Priority, "owner_uid", spec.Owner.UID)
	return e.job.clone(), nil
}

// transition moves a job to a new state, records the timing, persists and
// tells subscribers.
func (s *mstate) transition(e *entry, to State) {
	if e.job.State == to {
		s.persist(e)         // the placement may have changed; the state has not
		if e.outcome != "" { // an attempt ended before it left the state: watchers count it
			s.tellWatchers(Event{Type: EventState, Time: s.now(), State: to, Job: e.job.clone(), Outcome: e.outcome})
			e.outcome = ""
		}
		return
	}
	now := s.now()
	if t, ok := e.job.Timings[e.job.State]; ok && t.Left.IsZero() {
		t.Left = now
		e.job.Timings[e.job.State] = t
	}
	if to.Finished() && !e.job.State.Finished() {
		if c := s.owners[e.job.Spec.Owner.UID]; c != nil {
			c.active--
		}
	}
	e.job.State = to
	e.job.Timings[to] = Timing{Entered: now}
	e.job.History = append(e.job.History, StateChange{State: to, Time: now, Attempt: e.job.Attempts})
	if to.Finished() {
		e.job.Finished = now
		s.m.removeUpload(e.job) // the result stays; the audio copy is no longer needed
	}
	s.persist(e)
	s.emit(e, Event{Type: EventState, State: to})
	if to.Finished() {
		for id, ch := range e.subs {
			close(ch)
			delete(e.subs, id)
		}
	}
}

func (s *mstate) emit(e *entry, ev Event) {
	ev.Time, ev.Job = s.now(), e.job.clone()
	ev.Outcome, e.outcome = e.outcome, ""
	defer s.tellWatchers(ev)
	for id, ch := range e.subs {
		select {
		case ch <- ev:
		default: // a reader that fell behind is dropped, never waited for
			close(ch)
			delete(e.subs, id)
		}
	}
}

// dispatch starts pending jobs while fewer than MaxActive are placed, in
// length-aware order (order.go): highest priority first, then aged jobs by
// age, then shortest expected time.
func (s *mstate) dispatch() {
	for s.active < s.m.cfg.MaxActive && len(s.pending) > 0 {
		s.sortPending()
		k := s.nextDispatch()
		if k < 0 {
			break // only long jobs wait, and the slots left are kept for short ones
		}
		e := s.pending[k]
		s.pending = slices.Delete(s.pending, k, k+1) // zeroes the tail: no finished job kept alive
		s.active++
		s.holdLong(e)
		if e.parent != nil { // a chunk of a long job (chunks.go)
			s.startChunk(e)
			continue
		}
		ctx, cancel := context.WithCancel(s.ctx)
		e.cancel, e.running = cancel, true
		if s.chunkable(e) {
			go s.m.split(ctx, e.job.clone())
			continue
		}
		go s.m.work(ctx, e.job.clone())
	}
}

func (s *mstate) cancel(id string) (Job, error) {
	e, ok := s.jobs[id]
	if !ok {
		return Job{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if e.job.State.Finished() {
		return e.job.clone(), fmt.Errorf("%w: %s is %s", ErrFinished, id, e.job.State)
	}
	e.cancelled = true
	if e.split != nil {
		return s.cancelSplit(e), nil
	}
	if !e.running {
		s.pending = slices.DeleteFunc(s.pending, func(x *entry) bool { return x == e })
		e.job.Error, e.job.ErrorKind = "cancelled before it started", "cancelled"
		s.transition(e, Cancelled)
		s.m.log.Info("job cancelled while queued", "job", id)
		return e.job.clone(), nil
	}
	e.cancel() // the worker finishes it as cancelled
	return e.job.clone(), nil
}

// finish records an attempt's end: the result, a retry, or the failure.
func (s *mstate) finish(id string, res transcript.Transcript, err error) (retry bool) {
	e, ok := s.jobs[id]
	if !ok {
		return false
	}
	e.countAttempt()
	switch {
	case e.cancelled:
		e.job.Error, e.job.ErrorKind, e.outcome = "cancelled", "cancelled", OutcomeCancelled
		s.transition(e, Cancelled)
	case err == nil:
		s.learnRTF(e)
		e.job.Result, e.job.Progress, e.job.Error, e.outcome = &res, 100, "", OutcomeCompleted
		s.transition(e, Completed)
	case retryable(err) && e.job.Attempts <= s.m.cfg.MaxRetries:
		e.outcome = OutcomeRetried
		if isOOM(err) {
			e.job.OOMFactor = max(1, e.job.OOMFactor) * s.m.cfg.OOMGrowth
			e.job.RetryBytes = max(e.job.RetryBytes, neededBytes(err))
			e.outcome = OutcomeOOMRetried
		}
		e.job.Error = fmt.Sprintf("attempt %d: %v", e.job.Attempts, err)
		s.m.log.Warn("job attempt failed; retrying", "job", id, "attempt", e.job.Attempts, "err", err)
		s.transition(e, Pending)
		return true
	default:
		e.job.Error, e.job.ErrorKind, e.outcome = err.Error(), errorKind(err), OutcomeFailed
		s.transition(e, Failed)
	}
	s.m.log.Info("job finished", "job", id, "state", e.job.State, "attempts", e.job.Attempts, "err", e.job.Error)
	return false
}

// recover loads stored jobs: finished ones stay until their TTL, queued ones
// are queued again, and interrupted ones count their attempt and retry.
func (s *mstate) recover() error {
	if s.m.store == nil {
		return nil
	}
	stored, err := s.m.store.Jobs()
	if err != nil {
		return fmt.Errorf("recover jobs: %w", err)
	}
	for _, j := range stored {
		e := &entry{job: j, subs: map[int]chan Event{}}
		if !j.State.Finished() {
			e.job.Chunks = nil // chunks are cut again when it runs
		}
		if e.job.Timings == nil {
			e.job.Timings = map[State]Timing{}
		}
		s.add(e)
		switch {
		case j.State.Finished():
		case j.State != Pending && j.Attempts > s.m.cfg.MaxRetries:
			e.job.Error = fmt.Sprintf("the daemon stopped during attempt %d, the last allowed", j.Attempts)
			s.transition(e, Failed)
		default:
			if j.State != Pending {
				e.job.Error = fmt.Sprintf("attempt %d interrupted by a daemon restart", j.Attempts)
				s.transition(e, Pending)
			}
			s.pending = append(s.pending, e)
		}
	}
	s.m.log.Info("jobs recovered", "total", len(stored), "queued", len(s.pending))
	return nil
}

// expire drops finished jobs older than ResultTTL.
func (s *mstate) expire() {
	cutoff := s.now().Add(-s.m.cfg.ResultTTL)
	for id, e := range s.jobs {
		if e.job.State.Finished() && !e.job.Finished.After(cutoff) {
			s.drop(e)
			if s.m.store != nil {
				if err := s.m.store.DeleteJob(id); err != nil {
					s.m.log.Error("cannot delete expired job", "job", id, "err", err)
				}
			}
			s.m.removeUpload(e.job)
		}
	}
}

// rearm sets the timer to the next result expiry.
func (s *mstate) rearm(t *time.Timer) {
	var next time.Time
	for _, e := range s.jobs {
		if e.job.State.Finished() {
			at := e.job.Finished.Add(s.m.cfg.ResultTTL)
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	if next.IsZero() {
		t.Reset(time.Hour)
		return
	}
	t.Reset(max(0, next.Sub(s.now())))
}

func (s *mstate) shutdown() {
	for _, e := range s.jobs {
		if e.running && !e.job.State.Finished() {
			// Interrupted by a graceful stop: the attempt does not count; the
			// job is queued again at the next start.
			if e.granted {
				e.job.Attempts = max(0, e.job.Attempts-1)
			}
			e.job.Error = "interrupted by a daemon shutdown"
			s.transition(e, Pending)
		}
		if e.cancel != nil {
			e.cancel()
		}
		for id, ch := range e.subs {
			close(ch)
			delete(e.subs, id)
		}
	}
	s.closeWatchers()
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, ErrBadInput):
		return "bad_input"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	}
	return "backend"
}
