package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/wsched/wsched/jobs/transcript"
)

func retryable(err error) bool { return errors.Is(err, ErrRetryable) || errors.Is(err, ErrOutOfMemory) }
func isOOM(err error) bool     { return errors.Is(err, ErrOutOfMemory) }

// work runs a job's attempts until it completes, fails, is cancelled, or
// the manager stops (then the job stays in its state and resumes at the next
// start).
func (m *Manager) work(ctx context.Context, job Job) {
	defer func() {
		_ = m.do(context.Background(), func(s *mstate) {
			s.active--
			if e, ok := s.jobs[job.ID]; ok {
				e.running, e.cancel = false, nil
				s.releaseLong(e)
			}
		})
	}()
	for {
		if err := m.do(context.Background(), func(s *mstate) {
			e := s.jobs[job.ID]
			e.granted = false // the attempt counts once it has memory (Placed)
			job = e.job.clone()
		}); err != nil {
			return
		}
		actx, cancel := context.WithTimeout(ctx, m.cfg.JobTimeout)
		res, err := m.exec.Execute(actx, job, &reporter{m: m, id: job.ID})
		timedOut := errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		if ctx.Err() != nil && m.stopping() {
			return // shutdown: the job resumes at the next start
		}
		if timedOut && err != nil {
			err = fmt.Errorf("%w after %s ([jobs] timeout)", ErrTimeout, m.cfg.JobTimeout)
		}
		var retry bool
		if derr := m.do(context.Background(), func(s *mstate) { retry = s.finish(job.ID, res, err) }); derr != nil || !retry {
			return
		}
	}
}

// countAttempt counts the running attempt, once: when it is granted memory,
// or when it ends without (finish). Waiting in the placement queue — after a
// CUDA OOM, for a larger lease — does not use up an attempt.
func (e *entry) countAttempt() {
	if !e.granted {
		e.granted = true
		e.job.Attempts++
	}
}

// stopping reports whether the manager is shutting down.
func (m *Manager) stopping() bool {
	return m.st.ctx != nil && m.st.ctx.Err() != nil
}

// reporter forwards an attempt's progress to the owner loop.
type reporter struct {
	m  *Manager
	id string
}

func (r *reporter) with(f func(s *mstate, e *entry)) {
	_ = r.m.do(context.Background(), func(s *mstate) {
		if e, ok := s.jobs[r.id]; ok && !e.job.State.Finished() {
			f(s, e)
		}
	})
}

func (r *reporter) Placed(p Placement) {
	gpuModel := r.m.gpuModel(p.GPUUUID) // outside the loop: it may ask the engine
	r.with(func(s *mstate, e *entry) {
		e.gpuModel = gpuModel
		e.countAttempt()
		e.job.Backend, e.job.GPUIndex, e.job.GPUUUID, e.job.LeaseID, e.job.MemoryBytes = p.Backend, p.GPUIndex, p.GPUUUID, p.LeaseID, p.MemoryBytes
		s.transition(e, Loading)
	})
}

func (r *reporter) Processing() {
	r.with(func(s *mstate, e *entry) { s.transition(e, Processing) })
}

// Progress records pct, clamped to 0–100; NaN and ±Inf are dropped (they
// would make the job unstorable and its JSON unwritable).
func (r *reporter) Progress(pct float64) {
	if !finite(pct) {
		return
	}
	pct = min(max(pct, 0), 100)
	r.with(func(s *mstate, e *entry) {
		e.job.Progress = pct
		s.emit(e, Event{Type: EventProgress, Progress: pct})
	})
}

func (r *reporter) Segment(seg transcript.Segment) {
	r.with(func(s *mstate, e *entry) { s.emit(e, Event{Type: EventSegment, Segment: &seg}) })
}
