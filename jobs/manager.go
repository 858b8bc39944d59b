package jobs

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/wsched/wsched/internal/owner"
	"github.com/wsched/wsched/jobs/transcript"
)

// Executor runs one attempt of a job: it sizes and acquires the memory
// (waiting in the placement queue), loads or reuses a backend, transcribes,
// and reports progress. An error wrapping ErrRetryable (backend crash) or
// ErrOutOfMemory (CUDA OOM) is retried; any other error fails the job.
type Executor interface {
	Execute(ctx context.Context, job Job, r Reporter) (transcript.Transcript, error)
}

// Reporter receives an attempt's progress; its methods do not block for long.
type Reporter interface {
	// Placed: memory was granted and the backend is being loaded (loading).
	Placed(p Placement)
	// Processing: the backend is transcribing (processing).
	Processing()
	Progress(percent float64)
	Segment(s transcript.Segment)
}

// Placement is where an attempt runs.
type Placement struct {
	Backend     string
	GPUIndex    int
	GPUUUID     string
	LeaseID     string
	MemoryBytes int64
}

// Store persists jobs (the daemon's bbolt database).
type Store interface {
	PutJob(Job) error
	DeleteJob(id string) error
	Jobs() ([]Job, error)
}

// Config tunes a Manager.
type Config struct {
	// MaxRetries is [jobs] max_retries: attempts after the first.
	MaxRetries int
	// JobTimeout bounds one attempt, queue wait included.
	JobTimeout time.Duration
	// ResultTTL is how long finished jobs and results are kept.
	ResultTTL time.Duration
	// MaxActive bounds the jobs placed at once (waiting for memory or
	// running); the rest wait here, by priority.
	MaxActive int
	// MaxJobs bounds the jobs kept (pending, running and finished): [jobs]
	// max_jobs.
	MaxJobs int
	// UIDLimits bound the jobs of each uid but root ([limits] active_jobs,
	// stored_jobs); TokenLimits those of the TCP token's holder (owner uid
	// TokenUID: [limits] token_active_jobs, token_stored_jobs).
	UIDLimits, TokenLimits OwnerLimits
	// OOMGrowth scales the memory of an attempt after a CUDA OOM (1.5).
	OOMGrowth float64
	// MaxReorderWait is [jobs] max_reorder_wait (order.go); 0: arrival
	// order within a priority.
	MaxReorderWait time.Duration
	// Probe reads an audio file's duration at admission; nil: ProbeAudio.
	Probe AudioProbe
	// GPUModel names the GPU of a UUID for learning real-time factors
	// (NVML's name); nil: the UUID stands for its model.
	GPUModel func(uuid string) string
	// ChunkOver is [jobs] chunk_over: audio longer than this runs as
	// chunks cut by Splitter (chunks.go); 0 or a nil Splitter: never.
	ChunkOver time.Duration
	Splitter  Splitter
	// ShortReserve is [jobs] short_reserve: of the MaxActive slots, this
	// many are kept for short jobs (reserve.go); 0: none. ShortAudio is
	// [jobs] short_audio: less audio is short (unknown durations are long).
	ShortReserve int
	ShortAudio   time.Duration
}

// Manager owns the jobs. One goroutine (Run) holds all mutable state; the
// methods and the job workers send it closures.
type Manager struct {
	cfg   Config
	exec  Executor
	store Store
	log   *slog.Logger
	now   func() time.Time

	loop *owner.Loop[*mstate]
	st   *mstate
}

type entry struct {
	job       Job
	cancel    context.CancelFunc // of the running attempt
	running   bool
	granted   bool // the running attempt has been counted (countAttempt)
	cancelled bool
	subs      map[int]chan Event
	outcome   string // of the attempt that just ended, for the next event
	gpuModel  string // of the running attempt's GPU (RTF learning)
	// split is a long job's chunks (chunks.go); parent and index are set
	// on a chunk's own entry, which is queued but not in the table.
	split  *split
	parent *entry
	index  int
	long   bool // holds one of the slots long jobs may take (reserve.go)
}

// ownerCount is what one owner (uid) has in the table.
type ownerCount struct{ active, stored int }

type mstate struct {
	m       *Manager
	ctx     context.Context
	jobs    map[string]*entry
	pending []*entry
	active  int
	// activeLong counts the active jobs that are long (reserve.go).
	activeLong int
	nextSub    int
	// watchers get every job's events (Watch).
	watchers map[int]chan Event
	// owners counts each owner's jobs (OwnerLimits), kept by add, drop
	// and transition.
	owners map[int]*ownerCount
	// rtfs holds the learned real-time factors (order.go); see rtf.
	rtfs *RTFTable
}

// New returns a manager; start it with Run.
func New(cfg Config, exec Executor, store Store, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.MaxActive = cmp.Or(cfg.MaxActive, 64)
	cfg.MaxJobs = cmp.Or(cfg.MaxJobs, 10000)
	cfg.OOMGrowth = cmp.Or(cfg.OOMGrowth, 1.5)
	cfg.JobTimeout = cmp.Or(cfg.JobTimeout, time.Hour)
	cfg.ResultTTL = cmp.Or(cfg.ResultTTL, 24*time.Hour)
	cfg.ShortAudio = cmp.Or(cfg.ShortAudio, DefaultShortAudio)
	m := &Manager{cfg: cfg, exec: exec, store: store, log: log, now: time.Now, loop: owner.New[*mstate](ErrStopped)}
	m.st = &mstate{m: m, jobs: map[string]*entry{}, owners: map[int]*ownerCount{}}
	return m
}

// Run recovers stored jobs — queued ones resume, interrupted ones are
// retried — and then serves until ctx ends. Running attempts are cancelled
// on the way out; they resume at the next start.
func (m *Manager) Run(ctx context.Context) error {
	defer m.loop.Stop()
	s := m.st
	s.ctx = ctx
	if err := s.recover(); err != nil {
		return err
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.dispatch()
		s.rearm(timer)
		select {
		case <-ctx.Done():
			s.shutdown()
			return nil
		case o := <-m.loop.Ops():
			o.Run(s)
			o.Finish()
		case <-timer.C:
			s.expire()
		}
	}
}

// do runs f on the owner loop and waits for it.
func (m *Manager) do(ctx context.Context, f func(*mstate)) error { return m.loop.Do(ctx, f) }

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "job-" + hex.EncodeToString(b[:])
}

// Submit validates and queues a job.
func (m *Manager) Submit(ctx context.Context, spec Spec) (Job, error) {
	if spec.AudioPath == "" || spec.Model == "" {
		return Job{}, fmt.Errorf("%w: audio and model are required", ErrInvalid)
	}
	if _, err := transcript.ParseFormat(spec.Format); err != nil {
		return Job{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	secs := m.probe(ctx, spec.AudioPath)
	var out Job
	var err error
	derr := m.do(ctx, func(s *mstate) {
		if out, err = s.submit(spec); err == nil {
			out = s.admitted(out.ID, secs)
		}
	})
	return out, cmp.Or(derr, err)
}

// Admit checks, without submitting, that a job of owner uid would be
// admitted now ([jobs] max_jobs and the owner's limits): an early answer
// before an upload is read. Submit checks again, atomically.
func (m *Manager) Admit(ctx context.Context, uid int) error {
	var err error
	derr := m.do(ctx, func(s *mstate) { err = s.admit(uid) })
	return cmp.Or(derr, err)
}

// Get returns a job.
func (m *Manager) Get(ctx context.Context, id string) (Job, error) {
	var out Job
	var err error
	derr := m.do(ctx, func(s *mstate) {
		e, ok := s.jobs[id]
		if !ok {
			err = fmt.Errorf("%w: %s", ErrNotFound, id)
			return
		}
		out = e.job.clone()
		out.ExpectedStart = s.expectedStarts()[id]
	})
	return out, cmp.Or(derr, err)
}

// List returns all jobs, newest first.
func (m *Manager) List(ctx context.Context) ([]Job, error) {
	var out []Job
	err := m.do(ctx, func(s *mstate) {
		starts := s.expectedStarts()
		for _, e := range s.jobs {
			j := e.job.clone()
			j.ExpectedStart = starts[j.ID]
			out = append(out, j)
		}
	})
	slices.SortFunc(out, func(a, b Job) int { return b.Created.Compare(a.Created) })
	return out, err
}

// Cancel stops a job: a queued one never starts, a running one has its
// backend call cancelled (and its lease released by the executor).
func (m *Manager) Cancel(ctx context.Context, id string) (Job, error) {
	var out Job
	var err error
	derr := m.do(ctx, func(s *mstate) { out, err = s.cancel(id) })
	return out, cmp.Or(derr, err)
}

// Delete removes a finished job and its result from the table and the
// store, or cancels an unfinished one (as Cancel); deleted says which. A
// cancelled job stays until [jobs] result_ttl or the next Delete.
func (m *Manager) Delete(ctx context.Context, id string) (j Job, deleted bool, err error) {
	derr := m.do(ctx, func(s *mstate) {
		e, ok := s.jobs[id]
		switch {
		case !ok:
			err = fmt.Errorf("%w: %s", ErrNotFound, id)
		case e.job.State.Finished():
			j, deleted, err = e.job.clone(), true, s.delete(e)
		default:
			j, err = s.cancel(id)
		}
	})
	return j, deleted, cmp.Or(derr, err)
}

// Subscribe returns the job as it is now and a channel of its events: first
// a state event for every state it has been in, in order, then live events
// until it finishes (then the channel closes). stop ends it early.
func (m *Manager) Subscribe(ctx context.Context, id string) (Job, <-chan Event, func(), error) {
	ch := make(chan Event, 256)
	var cur Job
	var sub int
	var err error
	derr := m.do(ctx, func(s *mstate) {
		e, ok := s.jobs[id]
		if !ok {
			err = fmt.Errorf("%w: %s", ErrNotFound, id)
			return
		}
		cur = e.job.clone()
		for _, h := range cur.History {
			if len(ch) == cap(ch)-16 { // leave room for live events
				break
			}
			ch <- Event{Type: EventState, Time: h.Time, State: h.State, Job: cur}
		}
		if e.job.State.Finished() {
			close(ch)
			return
		}
		s.nextSub++
		sub = s.nextSub
		e.subs[sub] = ch
	})
	if err = cmp.Or(derr, err); err != nil {
		return Job{}, nil, nil, err
	}
	stop := func() {
		_ = m.do(context.Background(), func(s *mstate) {
			if e, ok := s.jobs[id]; ok {
				if c, ok := e.subs[sub]; ok {
					delete(e.subs, sub)
					close(c)
				}
			}
		})
	}
	return cur, ch, stop, nil
}

// Wait blocks until the job finishes (or ctx ends) and returns it. A
// subscription dropped for falling behind is renewed.
func (m *Manager) Wait(ctx context.Context, id string) (Job, error) {
	for {
		cur, ch, stop, err := m.Subscribe(ctx, id)
		if err != nil {
			return Job{}, err
		}
	recv:
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					break recv
				}
				cur = ev.Job
			case <-ctx.Done():
				stop()
				return cur, ctx.Err()
			}
		}
		stop()
		if cur.State.Finished() {
			return cur, nil
		}
		if cur, err = m.Get(ctx, id); err != nil || cur.State.Finished() {
			return cur, err
		}
		if err := ctx.Err(); err != nil {
			return cur, err
		}
	}
}

// removeUpload deletes an uploaded audio file with its job.
func (m *Manager) removeUpload(j Job) {
	if j.Spec.Uploaded && j.Spec.AudioPath != "" {
		if err := os.Remove(j.Spec.AudioPath); err != nil && !os.IsNotExist(err) {
			m.log.Warn("cannot remove uploaded audio", "job", j.ID, "err", err)
		}
	}
}
