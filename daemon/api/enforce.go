package api

// UsageReport is the body of POST /v1/leases/{id}/usage: what a holder's
// allocation cap (the preload enforcement tier, enforce/preload) reports at
// allocation time. A refused allocation, or use past the lease, is an
// `overrun` event on /v1/events at once.
type UsageReport struct {
	PID               int   `json:"pid"`
	UsedBytes         int64 `json:"used_bytes"`
	PeakBytes         int64 `json:"peak_bytes"`
	LimitBytes        int64 `json:"limit_bytes"`
	RefusedBytes      int64 `json:"refused_bytes"`
	RefusedTotalBytes int64 `json:"refused_total_bytes"`
}

// Enforcement is how the daemon holds a GPU's leases to their size: the
// tier ([enforcement] mode; "auto" picks the strongest the GPU and host
// allow) and why it was chosen.
type Enforcement struct {
	// Tier is nvml-limits, mps, preload or detect.
	Tier   string `json:"tier"`
	Reason string `json:"reason,omitempty"`
}

// GPUEnforcement is one GPU's tier on GET /v1/status.
type GPUEnforcement struct {
	GPUUUID string `json:"gpu_uuid"`
	Enforcement
}
