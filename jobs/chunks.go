package jobs

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wsched/wsched/jobs/chunk"
	"github.com/wsched/wsched/jobs/transcript"
	"github.com/wsched/wsched/placement"
)

// Long files across GPUs. A job whose audio is longer than [jobs]
// chunk_over is cut by the Splitter when it is first dispatched; its chunks
// are queued as units of their own — with the job's priority and arrival,
// each its own expected time — so that each is placed by the executor on
// whatever GPU or stream is free, in parallel, and a job of higher priority
// that arrives meanwhile goes before the chunks still queued (the long job
// yields at a chunk boundary). A chunk that fails is retried under the
// job's retry policy (its own attempts); the job fails when a chunk finally
// fails, and cancelling the job cancels its chunks. The job's progress is
// the audio done over the total; its result is the chunks' transcripts
// stitched with the recording's timestamps (jobs/chunk). A daemon restart
// runs the job's chunks again from the start.

// Splitter cuts a long job's audio into chunk files (jobs/audiocut in the
// daemon).
type Splitter interface {
	// Split writes the job's windows as files; fewer than two pieces
	// means the job runs whole.
	Split(ctx context.Context, job Job, over time.Duration) ([]ChunkFile, error)
	// Clean removes what Split wrote for the job.
	Clean(job Job)
}

// ChunkFile is one window of a long job's audio, written to Path.
type ChunkFile struct {
	Window chunk.Window
	Path   string
}

// Chunks is a chunked job's count of chunks (/v1/jobs).
type Chunks struct {
	Total   int `json:"total"`
	Done    int `json:"done"`
	Running int `json:"running"`
}

// split is a chunked job's state, owned by the manager's loop.
type split struct {
	ctx     context.Context // the job's: cancelling it cancels the chunks
	windows []chunk.Window
	units   []*entry
	results []transcript.Transcript
	pct     []float64
	running int
	emitted int // live segment events sent: the next one's ID
}

// chunkable reports whether e should be cut before it runs.
func (s *mstate) chunkable(e *entry) bool {
	c := s.m.cfg
	return c.Splitter != nil && c.ChunkOver > 0 && e.job.AudioSeconds > c.ChunkOver.Seconds()
}

// split cuts the job's audio outside the loop, then queues its chunks; a
// job that cannot be cut (or is one window) runs whole.
func (m *Manager) split(ctx context.Context, job Job) {
	files, err := m.cfg.Splitter.Split(ctx, job, m.cfg.ChunkOver)
	if err != nil || len(files) < 2 {
		if err != nil && ctx.Err() == nil {
			m.log.Warn("cannot cut long audio: the job runs whole", "job", job.ID, "err", err)
		}
		m.cfg.Splitter.Clean(job)
		m.work(ctx, job)
		return
	}
	if derr := m.do(context.Background(), func(s *mstate) { s.chunked(ctx, job.ID, files) }); derr != nil {
		m.cfg.Splitter.Clean(job) // stopping: the job is cut again at the next start
	}
}

// chunked queues the chunks of job id and gives back the slot its cutting
// held.
func (s *mstate) chunked(ctx context.Context, id string, files []ChunkFile) {
	s.active--
	e, ok := s.jobs[id]
	if ok {
		s.releaseLong(e) // the job itself holds no slot now; its chunks will
	}
	if !ok || e.job.State.Finished() || e.cancelled {
		if ok {
			e.running = false
			if e.cancel != nil {
				e.cancel()
			}
			if !e.job.State.Finished() {
				e.job.Error, e.job.ErrorKind = "cancelled before it started", "cancelled"
				s.transition(e, Cancelled)
			}
		}
		s.m.cfg.Splitter.Clean(Job{ID: id})
		return
	}
	sp := &split{ctx: ctx, results: make([]transcript.Transcript, len(files)), pct: make([]float64, len(files))}
	for i, f := range files {
		sp.windows = append(sp.windows, f.Window)
		spec := e.job.Spec
		spec.AudioPath, spec.Uploaded = f.Path, false
		c := &entry{parent: e, index: i, job: Job{
			ID: fmt.Sprintf("%s.c%d", id, i), Spec: spec, State: Pending, Created: e.job.Created, GPUIndex: -1,
			Timings: map[State]Timing{}, AudioSeconds: f.Window.Len().Seconds(),
		}}
		sp.units = append(sp.units, c)
		s.pending = append(s.pending, c)
	}
	e.split, e.job.Chunks = sp, &Chunks{Total: len(files)}
	s.persist(e)
	s.m.log.Info("long job cut into chunks", "job", id, "chunks", len(files), "audio_seconds", e.job.AudioSeconds)
}

// startChunk runs a queued chunk (its slot is already counted).
func (s *mstate) startChunk(c *entry) {
	p := c.parent
	ctx, cancel := context.WithCancel(p.split.ctx)
	c.cancel, c.running, c.granted = cancel, true, false
	p.split.running++
	p.job.Chunks.Running++
	go s.m.runChunk(ctx, c.job.clone(), p.job.ID, c.index)
}

// runChunk runs one attempt of a chunk and reports its end to the loop.
func (m *Manager) runChunk(ctx context.Context, job Job, parent string, index int) {
	actx, cancel := context.WithTimeout(ctx, m.cfg.JobTimeout)
	res, err := m.exec.Execute(actx, job, &chunkReporter{m: m, parent: parent, index: index})
	timedOut := errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()
	if timedOut && err != nil {
		err = fmt.Errorf("%w after %s ([jobs] timeout)", ErrTimeout, m.cfg.JobTimeout)
	}
	_ = m.do(context.Background(), func(s *mstate) {
		s.active--
		s.chunkDone(parent, index, res, err)
	})
}

// chunkDone records a chunk attempt's end: its result, a retry (queued
// again), or the job's failure; the job completes with its last chunk.
func (s *mstate) chunkDone(parent string, index int, res transcript.Transcript, err error) {
	e, ok := s.jobs[parent]
	if !ok || e.split == nil {
		return
	}
	sp, c := e.split, e.split.units[index]
	c.running, c.cancel = false, nil
	s.releaseLong(c)
	sp.running--
	e.job.Chunks.Running--
	c.countAttempt()
	switch {
	case e.cancelled || e.job.State.Finished():
	case err == nil:
		s.learnChunk(c)
		sp.results[index], sp.pct[index] = res, 100
		e.job.Chunks.Done++
		s.chunkProgress(e)
		if e.job.Chunks.Done == e.job.Chunks.Total {
			s.completeSplit(e)
		}
	case retryable(err) && c.job.Attempts <= s.m.cfg.MaxRetries:
		if isOOM(err) {
			c.job.OOMFactor = max(1, c.job.OOMFactor) * s.m.cfg.OOMGrowth
			c.job.RetryBytes = max(c.job.RetryBytes, neededBytes(err))
		}
		c.job.Error, c.job.State, sp.pct[index] = err.Error(), Pending, 0
		s.m.log.Warn("chunk attempt failed; retrying", "job", parent, "chunk", index, "attempt", c.job.Attempts, "err", err)
		s.pending = append(s.pending, c)
	default:
		w := sp.windows[index]
		s.failSplit(e, fmt.Errorf("chunk %d (%s–%s) after %d attempt(s): %w", index, w.Start, w.End, c.job.Attempts, err))
	}
	s.settle(e)
}

// learnChunk records a chunk's real-time factor (the job's own would count
// its chunks' parallel time).
func (s *mstate) learnChunk(c *entry) {
	if t, ok := c.job.Timings[Processing]; ok {
		k := RTFKey{Model: c.job.Spec.Model, Backend: c.job.Backend, GPUModel: c.gpuModel}
		s.rtf().Observe(k, c.job.AudioSeconds, s.now().Sub(t.Entered).Seconds())
	}
}

// chunkProgress sets the job's progress from its chunks' (audio done over
// the total) and tells subscribers.
func (s *mstate) chunkProgress(e *entry) {
	e.job.Progress = chunk.Progress(e.split.windows, e.split.pct)
	s.emit(e, Event{Type: EventProgress, Progress: e.job.Progress})
}

// completeSplit stitches the chunks' transcripts into the job's result.
func (s *mstate) completeSplit(e *entry) {
	res, err := chunk.Stitch(e.split.windows, e.split.results)
	if err != nil {
		s.failSplit(e, err)
		return
	}
	e.job.Result, e.job.Progress, e.job.Error, e.outcome = &res, 100, "", OutcomeCompleted
	s.transition(e, Completed)
	s.m.log.Info("job finished", "job", e.job.ID, "state", e.job.State, "chunks", e.job.Chunks.Total)
}

// failSplit fails the job: its queued chunks are dropped and its running
// ones cancelled.
func (s *mstate) failSplit(e *entry, err error) {
	s.dropChunks(e)
	e.job.Error, e.job.ErrorKind, e.outcome = err.Error(), errorKind(err), OutcomeFailed
	s.transition(e, Failed)
	s.m.log.Info("job finished", "job", e.job.ID, "state", e.job.State, "err", e.job.Error)
}

// cancelSplit cancels a chunked job: its queued chunks never start, its
// running ones are cancelled; it is cancelled when none runs.
func (s *mstate) cancelSplit(e *entry) Job {
	s.dropChunks(e)
	s.settle(e)
	s.m.log.Info("chunked job cancelled", "job", e.job.ID, "running_chunks", e.split.running)
	return e.job.clone()
}

// dropChunks takes e's chunks off the queue and cancels the running ones.
func (s *mstate) dropChunks(e *entry) {
	s.pending = slices.DeleteFunc(s.pending, func(x *entry) bool { return x.parent == e })
	if e.cancel != nil {
		e.cancel()
	}
}

// settle ends a chunked job that was cancelled or finished once none of
// its chunks runs any more: the state, the slot and the chunk files.
func (s *mstate) settle(e *entry) {
	if e.split.running > 0 || !(e.cancelled || e.job.State.Finished()) {
		return
	}
	if !e.job.State.Finished() {
		e.job.Error, e.job.ErrorKind, e.outcome = "cancelled", "cancelled", OutcomeCancelled
		s.transition(e, Cancelled)
	}
	if e.cancel != nil {
		e.cancel()
	}
	e.running, e.cancel = false, nil
	s.m.cfg.Splitter.Clean(e.job)
}

// chunkSlots adds the expected ends of a chunked job's running chunks.
func (s *mstate) chunkSlots(e *entry, slots *timeHeap, now time.Time) {
	for _, c := range e.split.units {
		if !c.running {
			continue
		}
		left := s.expectedOf(c)
		if t, ok := c.job.Timings[Processing]; ok {
			left -= now.Sub(t.Entered).Seconds()
		}
		heap.Push(slots, now.Add(seconds(max(0, left))))
	}
}

// chunkReporter forwards a chunk attempt's progress to its job.
type chunkReporter struct {
	m      *Manager
	parent string
	index  int
}

func (r *chunkReporter) with(f func(s *mstate, e, c *entry)) {
	_ = r.m.do(context.Background(), func(s *mstate) {
		if e, ok := s.jobs[r.parent]; ok && e.split != nil && !e.job.State.Finished() && !e.cancelled {
			f(s, e, e.split.units[r.index])
		}
	})
}

func (r *chunkReporter) Placed(p Placement) {
	gpuModel := r.m.gpuModel(p.GPUUUID)
	r.with(func(s *mstate, e, c *entry) {
		c.gpuModel = gpuModel
		c.countAttempt()
		c.job.Backend = p.Backend
		e.countAttempt() // the job's attempt counts from its first chunk's placement
		e.job.Backend, e.job.GPUIndex, e.job.GPUUUID, e.job.LeaseID, e.job.MemoryBytes = p.Backend, p.GPUIndex, p.GPUUUID, p.LeaseID, p.MemoryBytes
		if e.job.State == Pending {
			s.transition(e, Loading)
		}
	})
}

func (r *chunkReporter) Processing() {
	r.with(func(s *mstate, e, c *entry) {
		c.job.Timings[Processing] = Timing{Entered: s.now()}
		if e.job.State != Processing {
			s.transition(e, Processing)
		}
	})
}

func (r *chunkReporter) Progress(pct float64) {
	if !finite(pct) {
		return
	}
	r.with(func(s *mstate, e, _ *entry) {
		e.split.pct[r.index] = min(max(pct, 0), 100)
		s.chunkProgress(e)
	})
}

// Segment forwards a chunk's segment with the recording's timestamps,
// kept within the chunk's window as the stitched result keeps it. Chunks
// run in parallel and number their segments from 0 each, so a live
// segment's ID is the job's count of live segments sent before it: unique
// and increasing in the order the events arrive (the stitched result
// numbers its segments again, in the recording's order).
func (r *chunkReporter) Segment(seg transcript.Segment) {
	r.with(func(s *mstate, e, _ *entry) {
		w := e.split.windows[r.index]
		start, end := min(max(seg.Start, 0), w.Len()), min(max(seg.End, 0), w.Len())
		seg.ID, seg.Start, seg.End = e.split.emitted, w.Start+start, w.Start+max(start, end)
		e.split.emitted++
		s.emit(e, Event{Type: EventSegment, Segment: &seg})
	})
}

// SetChunking sets [jobs] chunk_over and the splitter (Config.ChunkOver,
// Config.Splitter); call it before Run.
func (m *Manager) SetChunking(over time.Duration, sp Splitter) {
	m.cfg.ChunkOver, m.cfg.Splitter = over, sp
}

// chunkGate says which queued chunks must not be dispatched now, so that a
// long job yields at chunk boundaries even where the executor's waiters
// are not served by priority (the plugin host hands an idle instance to
// whichever waiter asks first): at most one chunk of a job waits for its
// placement at a time, and none while a job of higher priority waits for
// its own.
func (s *mstate) chunkGate() func(e *entry) bool {
	if !slices.ContainsFunc(s.pending, func(e *entry) bool { return e.parent != nil }) {
		return func(*entry) bool { return false }
	}
	waitingParent := map[*entry]bool{}
	var top placement.Priority
	var any bool
	waits := func(e *entry, p placement.Priority) {
		if !any || p > top {
			top, any = p, true
		}
		if e.parent != nil {
			waitingParent[e.parent] = true
		}
	}
	for _, e := range s.jobs {
		switch {
		case e.split != nil:
			for _, c := range e.split.units {
				if c.running && !c.granted {
					waits(c, c.job.Spec.Priority)
				}
			}
		case e.running && !e.granted && !e.job.State.Finished():
			waits(e, e.job.Spec.Priority)
		}
	}
	return func(e *entry) bool {
		return e.parent != nil && (waitingParent[e.parent] || any && top > e.job.Spec.Priority)
	}
}
