package api

// Holder is the process a lease (or a job) belongs to.
type Holder struct {
	PID  int    `json:"pid"`
	UID  int    `json:"uid"`
	Name string `json:"name,omitempty"`
	// StartTicks is the process start time (clock ticks since boot), so a
	// reused PID is not mistaken for the holder.
	StartTicks uint64 `json:"start_ticks,omitempty"`
}

// GPU is one GPU on GET /v1/gpus: its reading, its accounting and the
// leases on it.
type GPU struct {
	GPUReading
	Accounting Account `json:"accounting"`
	Leases     []Lease `json:"leases"`
	// HeldBytes is the part of the available memory held for blocked queue
	// heads (see GPUs.Held): others cannot get it.
	HeldBytes int64 `json:"held_bytes"`
	// Enforcement is how this GPU's leases are held to their size.
	Enforcement *Enforcement `json:"enforcement,omitempty"`
}

// Hold is memory held on a GPU for a queued request that waited past
// [leases] backfill_window and still does not fit.
type Hold struct {
	LeaseID  string `json:"lease_id"`
	GPUIndex int    `json:"gpu_index"`
	GPUUUID  string `json:"gpu_uuid"`
	Bytes    int64  `json:"bytes"`
}

// GPUReading is what the inventory read from one GPU.
type GPUReading struct {
	Index      int    `json:"index"`
	UUID       string `json:"uuid"`
	Name       string `json:"name"`
	TotalBytes int64  `json:"total_bytes"`
	UsedBytes  int64  `json:"used_bytes"`
	FreeBytes  int64  `json:"free_bytes"`
	// UtilizationPct (0–100) and TemperatureC (°C) are optional: NVML may
	// not report them.
	UtilizationPct *int `json:"utilization_pct,omitempty"`
	TemperatureC   *int `json:"temperature_c,omitempty"`
	// MIG is disabled, enabled or unsupported.
	MIG string `json:"mig"`
	// Health is healthy or unhealthy; Reason says why when unhealthy.
	Health    string       `json:"health"`
	Reason    string       `json:"reason,omitempty"`
	Processes []GPUProcess `json:"processes"`
}

// UsedPct is used ÷ total in percent (0 when total is unknown).
func (g GPUReading) UsedPct() float64 {
	if g.TotalBytes <= 0 {
		return 0
	}
	return 100 * float64(g.UsedBytes) / float64(g.TotalBytes)
}

// GPUProcess is a compute process on a GPU.
type GPUProcess struct {
	PID       int    `json:"pid"`
	Name      string `json:"name,omitempty"`
	UsedBytes int64  `json:"used_bytes"`
	// UsedUnknown: NVML could not attribute memory to the process.
	UsedUnknown bool `json:"used_unknown,omitempty"`
}

// Account is the placement engine's accounting of one GPU (see
// placement.Accounting for the formula).
type Account struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	Name  string `json:"name"`

	TotalBytes      int64 `json:"total_bytes"`
	UsedBytes       int64 `json:"used_bytes"`
	FreeBytes       int64 `json:"free_bytes"`
	ReservedBytes   int64 `json:"reserved_bytes"`
	UsableBytes     int64 `json:"usable_bytes"`
	LeasedBytes     int64 `json:"leased_bytes"`
	AttributedBytes int64 `json:"attributed_bytes"`
	ForeignBytes    int64 `json:"foreign_bytes"`
	UnrealizedBytes int64 `json:"unrealized_bytes"`
	AvailableBytes  int64 `json:"available_bytes"`

	UtilizationPct *int `json:"utilization_pct,omitempty"`
	TemperatureC   *int `json:"temperature_c,omitempty"`
	// Placeable is false for unhealthy and MIG-enabled GPUs; Reason says why.
	Placeable bool   `json:"placeable"`
	Reason    string `json:"reason,omitempty"`
}

// AvailableOrZero is AvailableBytes, or 0 when the GPU is overcommitted.
func (a Account) AvailableOrZero() int64 { return max(0, a.AvailableBytes) }

// Stats counts placement events since the daemon started.
type Stats struct {
	Requests   uint64 `json:"requests"`
	Grants     uint64 `json:"grants"`
	Rejections uint64 `json:"rejections"`
	Releases   uint64 `json:"releases"`
	Expiries   uint64 `json:"expiries"`
	Overruns   uint64 `json:"overruns"`
	Renewals   uint64 `json:"renewals"`
	// Commits counts the lease journal's durable commits (fsyncs), and
	// CommittedChanges the lease changes in them (group commit: the
	// ratio is the changes per fsync).
	Commits          uint64 `json:"journal_commits"`
	CommittedChanges uint64 `json:"journal_changes"`
}
