package placement

import (
	"cmp"
	"slices"
	"time"

	"github.com/wsched/wsched/placement/inventory"
)

// View is the engine's state for display: accounting per GPU with the leases
// on it, CPU leases, the queue in dispatch order, and counters.
type View struct {
	Taken    time.Time      `json:"taken"`
	Provider string         `json:"provider"`
	Driver   string         `json:"driver,omitempty"`
	GPUs     []GPUView      `json:"gpus"`
	CPU      []Lease        `json:"cpu_leases"`
	Queue    []Lease        `json:"queue"`
	Queued   map[string]int `json:"queued_by_priority"`
	Stats    Stats          `json:"stats"`
	// Held lists the memory held back for blocked waiters that waited past
	// [leases] backfill_window: it is not available to others, though the
	// accounting formula counts it as available.
	Held []Hold `json:"held"`
}

// Hold is memory held on a GPU for one blocked waiter.
type Hold struct {
	LeaseID string `json:"lease_id"`
	GPU     string `json:"gpu_uuid"`
	Bytes   int64  `json:"bytes"`
}

// GPUView is one GPU's reading, accounting and leases.
type GPUView struct {
	Account
	Reading inventory.GPU `json:"-"`
	Leases  []Lease       `json:"leases"`
	// HeldBytes is the part of AvailableBytes held for blocked waiters.
	HeldBytes int64 `json:"held_bytes"`
}

// view builds the View that settle publishes. It reads the state only: the
// reading shown is the one the loop last adopted (Observe, or a decision
// that needed a fresh one).
func (s *state) view() View {
	now := s.now()
	accounts := s.accounts()
	v := View{Taken: s.snap.Taken, Provider: s.snap.Provider, Driver: s.snap.Driver, GPUs: make([]GPUView, 0, len(accounts)),
		CPU: []Lease{}, Queue: []Lease{}, Queued: map[string]int{"high": 0, "normal": 0, "low": 0}, Stats: s.stats}
	for i, a := range accounts {
		v.GPUs = append(v.GPUs, GPUView{Account: a, Reading: s.snap.GPUs[i], Leases: []Lease{}})
	}
	for _, l := range s.sortedLeases() {
		if l.GPU == CPU {
			v.CPU = append(v.CPU, l)
			continue
		}
		for i := range v.GPUs {
			if v.GPUs[i].UUID == l.GPU {
				v.GPUs[i].Leases = append(v.GPUs[i].Leases, l)
			}
		}
	}
	for _, w := range s.ordered(now) {
		v.Queue = append(v.Queue, w.lease.clone())
		v.Queued[w.lease.Priority.String()]++
	}
	v.Held = []Hold{}
	if len(s.queue) > 0 {
		_, hold, heldOn := s.plan(now)
		for i := range v.GPUs {
			v.GPUs[i].HeldBytes = hold[v.GPUs[i].UUID]
		}
		for _, l := range v.Queue {
			if gpu, ok := heldOn[l.ID]; ok {
				v.Held = append(v.Held, Hold{LeaseID: l.ID, GPU: gpu, Bytes: l.Bytes})
			}
		}
	}
	return v
}

// sortedLeases returns the granted leases, oldest first.
func (s *state) sortedLeases() []Lease {
	out := make([]Lease, 0, len(s.leases))
	for _, l := range s.leases {
		out = append(out, l.clone())
	}
	slices.SortFunc(out, func(a, b Lease) int { return cmp.Or(a.Granted.Compare(b.Granted), cmp.Compare(a.ID, b.ID)) })
	return out
}
