package api

import "time"

// GET /v1/jobs/trace answers JSON Lines (TraceContentType): a TraceHeader,
// then a TraceJob per job the client may see, in arrival order, then a
// TraceLease per recorded lease event, in order. `wsched sim --trace FILE`
// reads it: the job lines carry the keys of a workload line (arrival,
// audio_seconds, model, priority, uid), the rest is what happened.

// TraceContentType is the media type of GET /v1/jobs/trace.
const TraceContentType = "application/x-ndjson"

// Trace line kinds.
const (
	TraceKindHeader = "trace"
	TraceKindJob    = "job"
	TraceKindLease  = "lease"
)

// TraceHeader is a trace's first line. Times in the other lines are
// seconds after Origin.
type TraceHeader struct {
	Kind   string    `json:"kind"`
	Origin time.Time `json:"origin"`
	Jobs   int       `json:"jobs"`
	// LeaseEvents are the lease events that follow; LeaseEventsDropped
	// those the daemon no longer holds (it keeps the newest) or missed.
	LeaseEvents        int `json:"lease_events"`
	LeaseEventsDropped int `json:"lease_events_dropped,omitempty"`
}

// TraceJob is one job: a workload line's keys, then its outcome.
type TraceJob struct {
	Kind         string  `json:"kind"`
	Arrival      float64 `json:"arrival"`
	AudioSeconds float64 `json:"audio_seconds"`
	Model        string  `json:"model"`
	Priority     string  `json:"priority"`
	UID          int     `json:"uid"`

	ID       string `json:"id"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Backend  string `json:"backend,omitempty"`
	GPUIndex int    `json:"gpu_index"`
	// MemoryBytes is the last attempt's lease.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// WaitSeconds is from arrival to the first placement; ProcessingSeconds
	// from the last entry into processing to the end.
	WaitSeconds       float64 `json:"wait_seconds,omitempty"`
	ProcessingSeconds float64 `json:"processing_seconds,omitempty"`
	Chunks            int     `json:"chunks,omitempty"`
}

// TraceLease is one lease event (granted, released, resized, …).
type TraceLease struct {
	Kind     string  `json:"kind"`
	Time     float64 `json:"time"`
	Event    string  `json:"event"`
	Lease    string  `json:"lease"`
	GPUIndex int     `json:"gpu_index"`
	Bytes    int64   `json:"bytes"`
	UID      int     `json:"uid"`
	// Job is the job (or chunk) the lease runs, from its labels, when the
	// client may see them.
	Job string `json:"job,omitempty"`
}
