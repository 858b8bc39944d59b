package jobs

import (
	"container/heap"
	"context"
	"slices"
	"time"
)

// The manager's side of length-aware order (order.go): the audio's duration
// read at admission, the pending list sorted by Order, real-time factors
// learned from completed jobs and the expected start of queued jobs.

// unknownAudioSeconds is the duration assumed for audio of unknown length
// when expected starts are computed (ordering puts such jobs last).
const unknownAudioSeconds = 600

// probe reads the duration of the audio at path; 0 when unknown.
func (m *Manager) probe(ctx context.Context, path string) float64 {
	probe := m.cfg.Probe
	if probe == nil {
		probe = ProbeAudio
	}
	secs, err := probe(ctx, path)
	if err != nil || !(secs > 0) {
		m.log.Debug("audio duration unknown: the job is ordered as long", "path", path, "err", err)
		return 0
	}
	return secs
}

// gpuModel names the GPU of uuid for learning ("" on the CPU).
func (m *Manager) gpuModel(uuid string) string {
	if uuid == "" || m.cfg.GPUModel == nil {
		return uuid
	}
	if name := m.cfg.GPUModel(uuid); name != "" {
		return name
	}
	return uuid
}

// rtf is the table of learned real-time factors, made on first use.
func (s *mstate) rtf() *RTFTable {
	if s.rtfs == nil {
		s.rtfs = NewRTFTable()
	}
	return s.rtfs
}

// admitted records the audio's duration of a job just submitted.
func (s *mstate) admitted(id string, secs float64) Job {
	e := s.jobs[id]
	if secs > 0 {
		e.job.AudioSeconds = secs
		e.job.ExpectedSeconds = secs * s.rtf().ModelRTF(e.job.Spec.Model, true)
		s.persist(e)
	}
	// Watchers (top, the monitor page) see the queued job with its
	// expected start; Subscribe replays the history instead.
	s.dispatch()
	s.tellWatchers(Event{Type: EventState, Time: s.now(), State: e.job.State, Job: e.job.clone()})
	return e.job.clone()
}

// queued is what Order needs of a pending job; the expected time follows
// what has been learned since admission.
func (s *mstate) queued(e *entry) Queued {
	q := Queued{Priority: e.job.Spec.Priority, Arrived: e.job.Created, ExpectedSeconds: -1}
	if e.job.AudioSeconds > 0 {
		e.job.ExpectedSeconds = e.job.AudioSeconds * s.rtf().ModelRTF(e.job.Spec.Model, true)
		q.ExpectedSeconds = e.job.ExpectedSeconds
	}
	return q
}

// sortPending puts the pending jobs in dispatch order at the current time.
// Each job's Queued is taken once, not per comparison (it scans the
// learned real-time factors).
func (s *mstate) sortPending() {
	if len(s.pending) < 2 {
		return // nothing to compare
	}
	o, now := Order{MaxReorderWait: s.m.cfg.MaxReorderWait}, s.now()
	type item struct {
		e *entry
		q Queued
	}
	items := make([]item, len(s.pending))
	for i, e := range s.pending {
		items[i] = item{e, s.queued(e)}
	}
	slices.SortStableFunc(items, func(a, b item) int { return o.Compare(a.q, b.q, now) })
	for i, it := range items {
		s.pending[i] = it.e
	}
}

// learnRTF records a completed attempt's real-time factor.
func (s *mstate) learnRTF(e *entry) {
	t, ok := e.job.Timings[Processing]
	if !ok || e.job.AudioSeconds <= 0 || e.job.State != Processing {
		return
	}
	k := RTFKey{Model: e.job.Spec.Model, Backend: e.job.Backend, GPUModel: e.gpuModel}
	s.rtf().Observe(k, e.job.AudioSeconds, s.now().Sub(t.Entered).Seconds())
}

// expectedStarts estimates when each pending job starts: the jobs placed
// now (as many as run at once, at least one) finish after their expected
// time less what they have run; the pending ones follow in dispatch order,
// each on the slot that frees first. Unknown durations count as
// unknownAudioSeconds.
func (s *mstate) expectedStarts() map[string]time.Time {
	if len(s.pending) == 0 {
		return nil
	}
	now := s.now()
	slots := &timeHeap{}
	for _, e := range s.jobs {
		if e.split != nil {
			s.chunkSlots(e, slots, now)
			continue
		}
		if e.running && !e.job.State.Finished() {
			started := e.job.Created
			if t, ok := e.job.Timings[e.job.State]; ok {
				started = t.Entered
			}
			left := s.expectedOf(e) - now.Sub(started).Seconds()
			heap.Push(slots, now.Add(seconds(max(0, left))))
		}
	}
	for slots.Len() < max(1, min(s.active, s.m.cfg.MaxActive)) {
		heap.Push(slots, now)
	}
	s.sortPending()
	out := make(map[string]time.Time, len(s.pending))
	for _, e := range s.pending {
		start := heap.Pop(slots).(time.Time)
		out[e.job.ID] = start
		heap.Push(slots, start.Add(seconds(s.expectedOf(e))))
	}
	return out
}

func (s *mstate) expectedOf(e *entry) float64 {
	secs := e.job.AudioSeconds
	if secs <= 0 {
		secs = unknownAudioSeconds
	}
	return secs * s.rtf().ModelRTF(e.job.Spec.Model, true)
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// timeHeap is a min-heap of instants.
type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// SetOrder sets [jobs] max_reorder_wait and the GPU-model lookup for
// learning (Config.MaxReorderWait, Config.GPUModel); call it before Run.
// Without Config.Probe it also bounds the ffprobe processes audio
// durations may start (LimitedProbe, maxProbes).
func (m *Manager) SetOrder(maxReorderWait time.Duration, gpuModel func(uuid string) string) {
	m.cfg.MaxReorderWait, m.cfg.GPUModel = maxReorderWait, gpuModel
	if m.cfg.Probe == nil {
		m.cfg.Probe = LimitedProbe(maxProbes)
	}
}

// maxProbes bounds the ffprobe processes of the daemon's submissions.
const maxProbes = 4
