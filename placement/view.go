package placement

import (
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
	// UIDs is what each uid holds and waits for, its recent use and its
	// fair share, by uid.
	UIDs []UIDUse `json:"uids"`
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
