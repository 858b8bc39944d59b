package sim

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/placement"
)

// instance is a loaded backend on one GPU: a process serving up to max
// streams of one model under one lease.
type instance struct {
	id      int
	lease   string
	gpu     int
	prof    Profile
	streams int
	max     int
	readyAt float64 // when its load ends
	idleGen int     // invalidates a pending idle expiry
	gone    bool
}

// record is what happened to one job.
type record struct {
	start, finish float64
	placed        bool
}

type eventKind int

const (
	evArrival eventKind = iota
	evFinish
	evIdle
)

type event struct {
	at   float64
	seq  uint64
	kind eventKind
	job  int
	inst *instance
	gen  int
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// simulation is one run; a single goroutine owns it.
type simulation struct {
	cfg      Config
	m        *machine
	order    jobs.Order
	rtf      *jobs.RTFTable
	profiles map[string]Profile
	rng      *rand.Rand
	work     []Job // what is queued: the workload's jobs, or their windows (ChunkOver)
	records  []record
	orig     []Job // the workload when work holds windows
	parent   []int // work[i] is a window of orig[parent[i]]

	now      float64
	events   eventHeap
	seq      uint64
	pending  []int // job indexes
	busy     []int // streams running (or loading) per GPU
	long     []int // of which long jobs
	insts    []*instance
	nextInst int
	oom      int
	started  int
	finished int

	// time integrals for the means
	lastT                       float64
	streamSec, strandSec, lease float64
	avail                       []int64
}

func (s *simulation) push(e event) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.events, e)
}

func (s *simulation) run(ctx context.Context) error {
	s.busy, s.long, s.avail = make([]int, s.cfg.GPUs), make([]int, s.cfg.GPUs), make([]int64, s.cfg.GPUs)
	for i, j := range s.work {
		if _, err := s.profile(j.Model); err != nil {
			return err
		}
		s.push(event{at: j.Arrival, kind: evArrival, job: i})
	}
	for s.events.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := heap.Pop(&s.events).(event)
		s.advance(e.at)
		switch e.kind {
		case evArrival:
			s.pending = append(s.pending, e.job)
		case evFinish:
			if err := s.finish(ctx, e); err != nil {
				return err
			}
		case evIdle:
			if err := s.expire(ctx, e); err != nil {
				return err
			}
		}
		if err := s.dispatch(ctx); err != nil {
			return err
		}
	}
	if len(s.pending) > 0 {
		j := s.work[s.pending[0]]
		return fmt.Errorf("sim: %d jobs never placed (first: %s, %.0f s of audio): %w", len(s.pending), j.Model, j.AudioSeconds, ErrUnplaceable)
	}
	return nil
}

func (s *simulation) profile(model string) (Profile, error) {
	if p, ok := s.profiles[model]; ok {
		return p, nil
	}
	p, err := s.cfg.Profile(model)
	if err != nil {
		return Profile{}, err
	}
	s.profiles[model] = p
	return p, nil
}

// advance integrates the means up to t and moves the clock.
func (s *simulation) advance(t float64) {
	if dt := t - s.lastT; dt > 0 && s.finished < len(s.work) {
		s.m.available(s.avail)
		var streams int
		var stranded, leased float64
		for g := range s.busy {
			streams += s.busy[g]
			if s.busy[g] >= s.cfg.StreamsPerGPU || s.avail[g] < s.smallestNeed(g) {
				stranded += float64(max(0, s.avail[g]))
			}
		}
		for _, in := range s.insts {
			leased += float64(in.prof.LeaseBytes(in.streams))
		}
		s.streamSec += float64(streams) * dt
		s.strandSec += stranded * dt
		s.lease += leased * dt
		s.lastT = t
	}
	s.now = t
	s.m.clk.set(epoch.Add(seconds(t)))
}

// smallestNeed is the least a job of the workload's first model needs on
// GPU g now: one more stream on an instance with room, else a new instance.
func (s *simulation) smallestNeed(g int) int64 {
	p := s.profiles[s.work[0].Model]
	if s.cfg.Policy != ProcessPerJob {
		for _, in := range s.insts {
			if in.gpu == g && in.prof.Model == p.Model && in.streams < in.max {
				return p.PerStreamBytes
			}
		}
	}
	return p.LeaseBytes(1)
}

// dispatch starts queued jobs in the policy's order while they can be
// placed. Under FIFO and process-per-job the first that cannot be placed
// stops it (arrival order); under WSched the jobs behind it are tried too
// (a short job passes a long one held back by the short-job reserve).
func (s *simulation) dispatch(ctx context.Context) error {
	if len(s.pending) == 0 {
		return nil
	}
	now := epoch.Add(seconds(s.now))
	slices.SortStableFunc(s.pending, func(a, b int) int { return s.order.Compare(s.queued(a), s.queued(b), now) })
	kept := s.pending[:0]
	for k, i := range s.pending {
		if s.full() {
			kept = append(kept, s.pending[k:]...)
			break
		}
		ok, err := s.place(ctx, i)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		if s.cfg.Policy != WSched {
			kept = append(kept, s.pending[k:]...)
			break
		}
		kept = append(kept, i)
	}
	s.pending = kept
	return nil
}

// full reports whether no GPU has a free stream.
func (s *simulation) full() bool {
	for _, b := range s.busy {
		if b < s.cfg.StreamsPerGPU {
			return false
		}
	}
	return true
}

// isLong says whether job i counts as long (its audio, known at admission).
func (s *simulation) isLong(i int) bool { return s.work[i].AudioSeconds >= s.cfg.ShortSeconds }

// room says whether GPU g can start job i: a free stream, and for a long job
// under WSched one not kept for short jobs.
func (s *simulation) room(g, i int) bool {
	if s.busy[g] >= s.cfg.StreamsPerGPU {
		return false
	}
	if s.cfg.Policy != WSched || !s.isLong(i) {
		return true
	}
	var long int
	for _, n := range s.long {
		long += n
	}
	return long < s.cfg.GPUs*s.cfg.StreamsPerGPU-s.cfg.ShortReserve
}

func (s *simulation) queued(i int) jobs.Queued {
	j := s.work[i]
	return jobs.Queued{Priority: j.Priority, Arrived: epoch.Add(seconds(j.Arrival)), Seq: uint64(i),
		ExpectedSeconds: j.AudioSeconds * s.rtf.ModelRTF(j.Model, true)}
}

// place runs job i if it can start now: on an instance of its model with a
// free stream (the lease grows by one stream: Resize), else on a new
// instance on the GPU with a free compute slot and the most memory the
// engine grants (Acquire, no waiting).
func (s *simulation) place(ctx context.Context, i int) (bool, error) {
	j := s.work[i]
	p := s.profiles[j.Model]
	maxStreams := s.cfg.StreamsPerGPU
	if s.cfg.Policy == ProcessPerJob {
		maxStreams = 1
	}
	for _, in := range s.insts {
		if in.gone || in.prof.Model != j.Model || in.streams >= in.max || !s.room(in.gpu, i) {
			continue
		}
		if maxStreams > 1 || in.streams > 0 { // a process-per-job instance is reused only idle
			if _, err := s.m.eng.Resize(ctx, in.lease, p.LeaseBytes(in.streams+1)); err != nil {
				if errors.Is(err, placement.ErrNoFit) {
					continue
				}
				return false, fmt.Errorf("sim: resize: %w", err)
			}
		}
		s.startOn(in, i)
		return true, nil
	}
	s.m.available(s.avail)
	gpus := make([]int, 0, len(s.busy))
	for g := range s.busy {
		if s.room(g, i) {
			gpus = append(gpus, g)
		}
	}
	slices.SortStableFunc(gpus, func(a, b int) int { return cmp.Compare(s.avail[b], s.avail[a]) })
	for _, g := range gpus {
		if s.avail[g] < p.LeaseBytes(1) {
			break
		}
		s.nextInst++
		l, err := s.m.acquire(ctx, g, p.LeaseBytes(1), 100000+s.nextInst, 1000, j.Priority)
		if err != nil {
			if errors.Is(err, placement.ErrNoFit) {
				continue
			}
			return false, fmt.Errorf("sim: acquire: %w", err)
		}
		in := &instance{id: s.nextInst, lease: l.ID, gpu: g, prof: p, max: maxStreams, readyAt: s.now + p.LoadSeconds}
		s.insts = append(s.insts, in)
		s.started++
		s.startOn(in, i)
		return true, nil
	}
	return false, nil
}

// startOn runs job i as a stream of in.
func (s *simulation) startOn(in *instance, i int) {
	j := s.work[i]
	in.streams++
	in.idleGen++
	s.busy[in.gpu]++
	if s.isLong(i) {
		s.long[in.gpu]++
	}
	start := max(s.now, in.readyAt)
	jitter := 1 + s.cfg.Jitter*(2*s.rng.Float64()-1)
	finish := start + j.AudioSeconds*in.prof.RTF*jitter
	s.records[i] = record{start: start, finish: finish, placed: true}
	s.push(event{at: finish, kind: evFinish, job: i, inst: in})
	s.checkOOM(in.gpu)
}

// checkOOM counts a placement after which what the GPU's processes hold
// (measured per-process memory, the driver's reservation) passes its memory.
func (s *simulation) checkOOM(g int) {
	held := driverReservedBytes
	for _, in := range s.insts {
		if in.gpu == g && !in.gone {
			held += in.prof.ActualBytes(in.streams)
		}
	}
	if held > h100Bytes {
		s.oom++
	}
}

func (s *simulation) finish(ctx context.Context, e event) error {
	in, j := e.inst, s.work[e.job]
	s.finished++
	in.streams--
	s.busy[in.gpu]--
	if s.isLong(e.job) {
		s.long[in.gpu]--
	}
	r := s.records[e.job]
	s.rtf.Observe(jobs.RTFKey{Model: j.Model, Backend: string(estimator.WhisperCpp), GPUModel: H100}, j.AudioSeconds, r.finish-r.start)
	if in.streams == 0 {
		in.idleGen++
		s.push(event{at: s.now + s.cfg.KeepAlive.Seconds(), kind: evIdle, inst: in, gen: in.idleGen})
	}
	if in.max > 1 && in.streams > 0 {
		if _, err := s.m.eng.Resize(ctx, in.lease, in.prof.LeaseBytes(in.streams)); err != nil {
			return fmt.Errorf("sim: shrink: %w", err)
		}
	}
	return nil
}

// expire ends an instance idle for KeepAlive.
func (s *simulation) expire(ctx context.Context, e event) error {
	in := e.inst
	if in.gone || in.streams > 0 || in.idleGen != e.gen {
		return nil
	}
	if _, err := s.m.eng.Release(ctx, in.lease, "idle"); err != nil {
		return fmt.Errorf("sim: release: %w", err)
	}
	in.gone = true
	s.insts = slices.DeleteFunc(s.insts, func(x *instance) bool { return x == in })
	return nil
}
