// Package api defines the JSON of wsched's HTTP API (version 1): the wire
// types of requests, responses and errors shared by the daemon and its
// clients. It imports none of the daemon's engines, so a client links no
// TOML, NVML or placement code; daemon/api/convert builds these types from
// the engines' values.
package api

import "time"

// MaxBodyBytes bounds request bodies; larger ones are answered 413.
const MaxBodyBytes = 64 << 10

// ErrorBody is every error response: {"error":{"code":"…","message":"…"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail names the error (a stable code) and explains it.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// LeaseRequest is the body of POST /v1/leases. Exactly one of MemoryBytes
// and Model says how much memory is needed.
type LeaseRequest struct {
	MemoryBytes int64  `json:"memory_bytes,omitempty"`
	Model       string `json:"model,omitempty"`
	// With Model: the estimator's inputs.
	Precision      string  `json:"precision,omitempty"`
	Backend        string  `json:"backend,omitempty"`
	SegmentSeconds float64 `json:"segment_seconds,omitempty"`
	BatchSize      int     `json:"batch_size,omitempty"`
	Beam           int     `json:"beam,omitempty"`
	// Device is auto (default), cuda, cuda:N, a GPU UUID or cpu.
	Device string `json:"device,omitempty"`
	// Priority is high, normal (default) or low.
	Priority string `json:"priority,omitempty"`
	// TTLSeconds is the lease's time to live ([leases] default_ttl when 0).
	TTLSeconds float64 `json:"ttl_seconds,omitempty"`
	// WaitSeconds lets the request wait in the queue (long poll); 0 answers
	// at once.
	WaitSeconds float64 `json:"wait_seconds,omitempty"`
	// Holder names the process the lease belongs to; by default the
	// connecting process. Another PID must belong to the same user.
	Holder *HolderRequest    `json:"holder,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// IdempotencyKey (at most 128 printable characters) makes a retried
	// request get the same lease: when the requesting uid already holds a
	// granted lease with this key, that lease is answered (200) instead of
	// a new grant. The key is kept with the lease (label
	// wsched.idempotency_key), so it holds across daemon restarts.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// IdempotencyLabel is the lease label that keeps a request's
// IdempotencyKey.
const IdempotencyLabel = "wsched.idempotency_key"

// HolderRequest is the holder part of a lease request.
type HolderRequest struct {
	PID  int    `json:"pid,omitempty"`
	Name string `json:"name,omitempty"`
}

// RenewRequest is the (optional) body of POST /v1/leases/{id}/renew.
type RenewRequest struct {
	TTLSeconds float64 `json:"ttl_seconds,omitempty"`
}

// PIDRequest is the body of POST /v1/leases/{id}/pids: one more process
// whose GPU memory counts against the lease.
type PIDRequest struct {
	PID int `json:"pid"`
}

// Lease is a lease as the API shows it.
type Lease struct {
	ID          string            `json:"id"`
	State       string            `json:"state"`
	GPUIndex    int               `json:"gpu_index"`
	GPUUUID     string            `json:"gpu_uuid,omitempty"`
	GPUName     string            `json:"gpu_name,omitempty"`
	MemoryBytes int64             `json:"memory_bytes"`
	Device      string            `json:"device"`
	Priority    string            `json:"priority"`
	Holder      Holder            `json:"holder"`
	PIDs        []int             `json:"pids,omitempty"`
	TTLSeconds  float64           `json:"ttl_seconds"`
	Created     time.Time         `json:"created"`
	Granted     *time.Time        `json:"granted,omitempty"`
	Expires     *time.Time        `json:"expires,omitempty"`
	Ended       *time.Time        `json:"ended,omitempty"`
	Reason      string            `json:"reason,omitempty"`
	UsedBytes   int64             `json:"used_bytes"`
	PeakBytes   int64             `json:"peak_bytes,omitempty"`
	Overrun     bool              `json:"overrun,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	EstimateKey *EstimateKey      `json:"estimate_key,omitempty"`
	// Reclaimable: the holder gives the memory back on demand (an idle
	// backend kept warm) since ReclaimableSince.
	Reclaimable      bool              `json:"reclaimable,omitempty"`
	ReclaimableSince *time.Time        `json:"reclaimable_since,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
	Estimate         any               `json:"estimate,omitempty"`
	GPUTotalBytes    int64             `json:"gpu_total_bytes,omitempty"`
}

// Event is one placement event on GET /v1/events.
type Event struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Type   string    `json:"type"`
	Lease  Lease     `json:"lease"`
	Reason string    `json:"reason,omitempty"`
}

// GPUs is the body of GET /v1/gpus.
type GPUs struct {
	Taken    time.Time `json:"taken"`
	Provider string    `json:"provider"`
	Driver   string    `json:"driver,omitempty"`
	Policy   string    `json:"policy"`
	GPUs     []GPU     `json:"gpus"`
	CPU      []Lease   `json:"cpu_leases"`
	Queue    []Lease   `json:"queue"`
	// Held lists the memory held for blocked queue entries.
	Held []Hold `json:"held"`
	// UIDs is what each uid holds and waits for, its recent use and its
	// fair share.
	UIDs []UIDUse `json:"uids"`
}

// UIDUse is one uid's part of the machine: what it holds and waits for,
// its recent use (GiB·seconds of granted GPU memory, decayed with
// [placement] fair_share_half_life) next to its fair share.
type UIDUse struct {
	UID         int   `json:"uid"`
	Leases      int   `json:"leases"`
	Bytes       int64 `json:"bytes"`
	Queued      int   `json:"queued"`
	QueuedBytes int64 `json:"queued_bytes"`
	// HeldBytes is memory held for its requests that waited past
	// backfill_window (in /v1/gpus; 0 in /v1/status).
	HeldBytes     int64   `json:"held_bytes"`
	UseGiBSeconds float64 `json:"use_gib_seconds"`
	// UseFraction is its part of all uids' recent use, 0 to 1.
	UseFraction float64 `json:"use_fraction"`
	// Share is its fair share of the GPUs (1 / uids holding or waiting
	// for GPU memory; 0 when it does neither), ShareBytes that part of
	// their usable memory.
	Share      float64 `json:"share"`
	ShareBytes int64   `json:"share_bytes"`
}

// Status is the body of GET /v1/status.
type Status struct {
	Version     string    `json:"version"`
	PID         int       `json:"pid"`
	Started     time.Time `json:"started"`
	Socket      string    `json:"socket"`
	StateDir    string    `json:"state_dir"`
	Provider    string    `json:"provider"`
	Policy      string    `json:"policy"`
	GPUs        int       `json:"gpus"`
	Leases      int       `json:"leases"`
	LeasedBytes int64     `json:"leased_bytes"`
	// HeldBytes is the memory held for blocked queue heads, on all GPUs.
	HeldBytes       int64          `json:"held_bytes"`
	QueueLength     int            `json:"queue_length"`
	QueueByPrio     map[string]int `json:"queue_by_priority"`
	Stats           Stats          `json:"stats"`
	SocketActivated bool           `json:"socket_activated"`
	// UIDs is each uid's leases, bytes, waiting requests, use and share.
	UIDs []UIDUse `json:"uids"`
}
