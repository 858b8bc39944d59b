package placement

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/device"
)

// Sentinel errors. Rejections wrap one of these with the reason in words.
var (
	ErrInvalid     = errors.New("invalid request")
	ErrNotFound    = errors.New("no such lease")
	ErrEnded       = errors.New("lease has ended")
	ErrNoFit       = errors.New("does not fit now")
	ErrTooLarge    = errors.New("larger than any GPU can hold")
	ErrNoSuchGPU   = errors.New("no such GPU")
	ErrQueueFull   = errors.New("queue full")
	ErrLimit       = errors.New("limit exceeded")
	ErrTimeout     = errors.New("timed out waiting for memory")
	ErrCancelled   = errors.New("request cancelled")
	ErrNoInventory = errors.New("no GPU reading available")
	ErrStopped     = errors.New("placement engine stopped")
)

// CPU is the GPU field of leases that run on the CPU.
const CPU = "cpu"

// State of a lease or request.
type State string

// States. A request is queued until it is granted or rejected; a granted
// lease ends released or expired.
const (
	StateQueued   State = "queued"
	StateGranted  State = "granted"
	StateReleased State = "released"
	StateExpired  State = "expired"
	StateRejected State = "rejected"
)

// Holder is the process a lease belongs to.
type Holder struct {
	PID  int    `json:"pid"`
	UID  int    `json:"uid"`
	Name string `json:"name,omitempty"`
	// StartTicks is the process start time (clock ticks since boot, from
	// /proc/PID/stat) so a reused PID is not mistaken for the holder.
	StartTicks uint64 `json:"start_ticks,omitempty"`
}

// Lease is GPU memory granted to a holder until it is released or expires.
// Queued requests are reported as leases in state queued, without a GPU.
type Lease struct {
	ID       string `json:"id"`
	State    State  `json:"state"`
	GPU      string `json:"gpu,omitempty"` // GPU UUID or "cpu"
	GPUIndex int    `json:"gpu_index"`     // -1 for cpu and queued
	GPUName  string `json:"gpu_name,omitempty"`
	// GPUTotalBytes is the GPU's total memory (for memory-fraction hints).
	GPUTotalBytes int64 `json:"gpu_total_bytes,omitempty"`
	Bytes         int64 `json:"memory_bytes"`
	// Device is what the request asked for (auto, cuda:N, a UUID, cpu).
	Device   device.Spec `json:"device"`
	Priority Priority    `json:"priority"`
	Holder   Holder      `json:"holder"`
	// PIDs are further processes whose GPU memory counts against the lease
	// (backend subprocesses the daemon started for the holder).
	PIDs []int `json:"pids,omitempty"`
	// PIDStarts are the start times (clock ticks since boot, as
	// Holder.StartTicks) of PIDs when they were added, where known: a
	// restart counts a PID only if it is still that process.
	PIDStarts map[int]uint64 `json:"pid_start_ticks,omitempty"`
	TTL       time.Duration  `json:"ttl"`
	Created   time.Time      `json:"created"`
	Granted   time.Time      `json:"granted,omitzero"`
	Expires   time.Time      `json:"expires,omitzero"`
	Ended     time.Time      `json:"ended,omitzero"`
	// Reason says why a lease ended or a request was rejected.
	Reason string `json:"reason,omitempty"`
	// UsedBytes is what NVML last measured for the lease's processes, and
	// Overrun whether that exceeds the lease beyond the tolerance.
	UsedBytes int64 `json:"used_bytes"`
	// PeakBytes is the most NVML has measured for it during its life.
	PeakBytes int64 `json:"peak_bytes,omitempty"`
	Overrun   bool  `json:"overrun,omitempty"`
	// MaxBytes is the largest size the lease has had when it was resized
	// (0: never resized). An instance serving several streams grows its
	// lease by one stream's estimate per stream (issue 26): a lease whose
	// MaxBytes is above its Bytes measured its peak at more streams than
	// its EstimateKey is for.
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// Labels carry caller data through the lease.
	Labels map[string]string `json:"labels,omitempty"`
	// EstimateKey, when set, is what the lease was sized for: its measured
	// peak is learned under this key when it ends.
	EstimateKey *estimator.Key `json:"estimate_key,omitempty"`
	// Reclaimable says the holder can give the memory back on demand (an
	// idle backend kept warm), since ReclaimableSince. A request that does
	// not fit otherwise asks for it with an EventReclaim.
	Reclaimable      bool      `json:"reclaimable,omitempty"`
	ReclaimableSince time.Time `json:"reclaimable_since,omitzero"`

	// limitBytes is the request's [limits] bytes: a resize that grows the
	// lease is held to it too (not stored: a restored lease has none).
	limitBytes int64
}

// Active reports whether the lease holds memory.
func (l Lease) Active() bool { return l.State == StateGranted }

// pids returns the holder and registered PIDs.
func (l *Lease) pids() []int { return append([]int{l.Holder.PID}, l.PIDs...) }

// clone copies l so the caller may keep it while the engine changes its own.
func (l *Lease) clone() Lease {
	c := *l
	c.PIDs = append([]int(nil), l.PIDs...)
	if l.PIDStarts != nil {
		c.PIDStarts = maps.Clone(l.PIDStarts)
	}
	if l.EstimateKey != nil {
		k := *l.EstimateKey
		c.EstimateKey = &k
	}
	return c
}

// Request asks for a lease.
type Request struct {
	Bytes    int64
	Device   device.Spec
	Priority Priority
	// TTL is the lease's time to live (0: [leases] default_ttl).
	TTL time.Duration
	// Wait is how long the request may queue when memory is short (0: fail
	// at once with ErrNoFit).
	Wait   time.Duration
	Holder Holder
	Labels map[string]string
	// EstimateKey is what Bytes was estimated for (nil: given, not
	// estimated); the lease carries it.
	EstimateKey *estimator.Key
	// Limits bound what Holder.UID may hold and wait for, counting this
	// request; checked on the owner loop in the step that queues or grants
	// it (the zero value: no limits, as for root).
	Limits Limits
}

// String names the priority: high, normal or low.
func (p Priority) String() string {
	switch {
	case p >= High:
		return "high"
	case p <= Low:
		return "low"
	}
	return "normal"
}

// ParsePriority reads high, normal or low ("" is normal).
func ParsePriority(s string) (Priority, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "high":
		return High, nil
	case "", "normal":
		return Normal, nil
	case "low":
		return Low, nil
	}
	return Normal, fmt.Errorf("%w: priority %q: want high, normal or low", ErrInvalid, s)
}

// MarshalText implements encoding.TextMarshaler.
func (p Priority) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *Priority) UnmarshalText(b []byte) error {
	v, err := ParsePriority(string(b))
	*p = v
	return err
}
