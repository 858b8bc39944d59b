package placement

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsched/wsched/placement/inventory"
)

// board is where the owner loop publishes its state for readers: View reads
// the latest published frame without entering the loop, so readers never
// queue behind writers. The loop publishes after every step that changed
// something, before it answers anyone, so a caller sees its own change.
//
// Publishing costs O(changes): a frame shares with the previous one every
// part that did not change (the lease sets are persistent treaps). The
// View itself is assembled from a frame by its first reader.
type board struct {
	frame atomic.Pointer[frame]
	gen   atomic.Uint64 // generation of the published frame
}

// frame is one published state: immutable once stored.
type frame struct {
	hdr    View   // Taken, Provider, Driver, Stats
	queued [3]int // low, normal, high
	gpus   gpuFrames
	cpu    *tnode
	queue  *tnode
	now    time.Time
	aging  time.Duration
	hold   map[string]int64
	heldOn map[string]string
	fair   *fairness // the queue's order at now (nil: empty queue)
	uids   uidFrame
	once   sync.Once
	view   View
}

// gpuFrame is one GPU's published account, reading and leases.
type gpuFrame struct {
	acct    Account
	reading inventory.GPU
	leases  *tnode
}

// gpuFrames is the published GPUs in chunks, so that a change to one GPU
// copies one chunk and the list of chunks, not the whole list.
type gpuFrames struct {
	chunks []*gpuChunk
	n      int
}

const chunkLen = 32

type gpuChunk [chunkLen]*gpuFrame

// markChanged notes that the next settle must publish.
func (s *state) markChanged() { s.dirty = true }

// answer queues f (a reply to a caller) until the loop has published what
// the current step changed.
func (s *state) answer(f func()) { s.answers = append(s.answers, f) }

// settle ends a step of the owner loop: it publishes when something
// changed, then delivers the step's answers.
func (s *state) settle() {
	s.commitStep()
	if s.dirty {
		s.dirty = false
		s.gen++
		s.board.frame.Store(s.frame())
		s.board.gen.Store(s.gen)
	}
	answers := s.answers
	s.answers = nil
	for _, f := range answers {
		f()
	}
}

// frame builds the frame to publish from the parts that changed.
func (s *state) frame() *frame {
	now := s.now()
	accts := s.accounts()
	if s.pubAll || s.pubGPUs.n != len(s.books) {
		s.pubAll = false
		s.pubGPUs = gpuFrames{n: len(s.books), chunks: make([]*gpuChunk, (len(s.books)+chunkLen-1)/chunkLen)}
		for i := range s.pubGPUs.chunks {
			s.pubGPUs.chunks[i] = &gpuChunk{}
		}
		for i, b := range s.books {
			s.pubGPUs.chunks[i/chunkLen][i%chunkLen] = &gpuFrame{acct: accts[i], reading: b.g, leases: b.pub}
		}
	} else if len(s.pubDirty) > 0 {
		s.pubGPUs.chunks = slices.Clone(s.pubGPUs.chunks)
		clear(s.pubCopied)
	}
	for _, b := range s.pubDirty {
		b.dirtyPub = false
		if b.idx < 0 {
			continue
		}
		ci := b.idx / chunkLen
		if !s.pubCopied[ci] { // copy each chunk once per frame
			c := *s.pubGPUs.chunks[ci]
			s.pubGPUs.chunks[ci] = &c
			if s.pubCopied == nil {
				s.pubCopied = map[int]bool{}
			}
			s.pubCopied[ci] = true
		}
		s.pubGPUs.chunks[ci][b.idx%chunkLen] = &gpuFrame{acct: accts[b.idx], reading: b.g, leases: b.pub}
	}
	s.pubDirty = s.pubDirty[:0]
	f := &frame{
		hdr:    View{Taken: s.snap.Taken, Provider: s.snap.Provider, Driver: s.snap.Driver, Stats: s.withJournal(s.stats)},
		queued: [3]int{s.queue.classes[0].live, s.queue.classes[1].live, s.queue.classes[2].live},
		gpus:   s.pubGPUs, cpu: s.cpuPub, queue: s.queue.published(), now: now, aging: s.opts.Leases.Aging.D(),
	}
	if s.queue.len() > 0 {
		_, f.hold, f.heldOn = s.plan(now)
		f.fair = s.fairness(now).clone()
	}
	f.uids = s.uidFrame()
	return f
}

// View assembles the frame's View, once.
func (f *frame) View() View {
	f.once.Do(func() { f.view = f.build() })
	return f.view
}

func (f *frame) build() View {
	v := f.hdr
	v.Queued = map[string]int{"low": f.queued[0], "normal": f.queued[1], "high": f.queued[2]}
	v.GPUs = make([]GPUView, f.gpus.n)
	for i := range v.GPUs {
		g := f.gpus.chunks[i/chunkLen][i%chunkLen]
		v.GPUs[i] = GPUView{Account: g.acct, Reading: g.reading, HeldBytes: f.hold[g.acct.UUID],
			Leases: tappend(g.leases, make([]Lease, 0, tsize(g.leases)))}
	}
	v.CPU = tappend(f.cpu, make([]Lease, 0, tsize(f.cpu)))
	v.Queue = tappend(f.queue, make([]Lease, 0, tsize(f.queue)))
	slices.SortStableFunc(v.Queue, f.dispatchOrder)
	v.Held = []Hold{}
	heldBy := map[int]int64{}
	for _, l := range v.Queue {
		if gpu, ok := f.heldOn[l.ID]; ok {
			v.Held = append(v.Held, Hold{LeaseID: l.ID, GPU: gpu, Bytes: l.Bytes})
			heldBy[l.Holder.UID] += l.Bytes
		}
	}
	v.UIDs = f.uids.uses(f.now, heldBy)
	return v
}

// dispatchOrder orders queued requests as the engine dispatches them at
// the frame's time: effective priority, the uid's recent use, arrival.
func (f *frame) dispatchOrder(a, b Lease) int {
	return f.fair.compare(&a, &b, 0, 0)
}

// Summary counts what the published View shows, without assembling it.
type Summary struct {
	Taken       time.Time
	Provider    string
	GPUs        int
	Leases      int // granted, GPU and CPU
	CPULeases   int // granted on the CPU
	Queued      int
	QueuedBy    map[string]int // by priority, as View.Queued
	LeasedBytes int64          // Σ of the GPUs' LeasedBytes
	HeldBytes   int64          // Σ of the GPUs' HeldBytes
	Stats       Stats
	// UIDs is each uid's holdings, use and share (HeldBytes left 0).
	UIDs []UIDUse
}

// summary is O(GPUs): what GET /v1/status and the systemd status line need
// without assembling every lease.
func (f *frame) summary() Summary {
	s := Summary{Taken: f.hdr.Taken, Provider: f.hdr.Provider, GPUs: f.gpus.n, Leases: tsize(f.cpu), CPULeases: tsize(f.cpu), Queued: tsize(f.queue),
		QueuedBy: map[string]int{"low": f.queued[0], "normal": f.queued[1], "high": f.queued[2]}, Stats: f.hdr.Stats}
	for i := 0; i < f.gpus.n; i++ {
		g := f.gpus.chunks[i/chunkLen][i%chunkLen]
		s.Leases += tsize(g.leases)
		s.LeasedBytes += g.acct.LeasedBytes
		s.HeldBytes += f.hold[g.acct.UUID]
	}
	s.UIDs = f.uids.uses(f.now, nil)
	return s
}

// accounts returns the published accounts of every GPU and the driver
// version, without the leases.
func (f *frame) accounts() ([]Account, string) {
	out := make([]Account, f.gpus.n)
	for i := range out {
		out[i] = f.gpus.chunks[i/chunkLen][i%chunkLen].acct
	}
	return out, f.hdr.Driver
}

// withJournal adds the journal's counters to st.
func (s *state) withJournal(st Stats) Stats {
	if s.journal != nil {
		st.Commits, st.CommittedChanges = s.journal.commits.Load(), s.journal.changes.Load()
	}
	return st
}
