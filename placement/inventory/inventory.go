// Package inventory reads the GPUs of this machine: one consistent snapshot
// per reading with, per GPU, memory, utilization, temperature and the compute
// processes holding memory. Providers: nvml (the NVIDIA driver's library),
// sim (GPUs declared in config, served through go-nvml's mock so the very same
// NVML code path runs), none (CPU only) and auto (NVML when it loads, else
// none).
package inventory

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors.
var (
	// ErrNoLibrary means the NVML shared library could not be loaded.
	ErrNoLibrary = errors.New("NVIDIA management library (libnvidia-ml.so.1) not found: is the NVIDIA driver installed?")
	// ErrClosed is returned by a provider used after Close.
	ErrClosed = errors.New("inventory provider closed")
)

// Provider yields snapshots of the machine's GPUs.
type Provider interface {
	// Name says which provider this is: "nvml", "sim" or "none".
	Name() string
	// Snapshot reads every GPU now. A failure on one GPU marks that GPU
	// unhealthy; an error means no reading could be taken at all.
	Snapshot(ctx context.Context) (Snapshot, error)
	// Close releases the provider (NVML shutdown).
	Close() error
}

// Snapshot is one reading of all GPUs, taken at one time.
type Snapshot struct {
	Taken    time.Time `json:"taken"`
	Provider string    `json:"provider"`
	// Driver is the NVIDIA driver version, when known.
	Driver string `json:"driver,omitempty"`
	GPUs   []GPU  `json:"gpus"`
}

// Age is how old the snapshot is at now.
func (s Snapshot) Age(now time.Time) time.Duration { return now.Sub(s.Taken) }

// GPU lookup helpers.

// ByIndex returns the GPU with NVML index i.
func (s Snapshot) ByIndex(i int) (GPU, bool) {
	for _, g := range s.GPUs {
		if g.Index == i {
			return g, true
		}
	}
	return GPU{}, false
}

// ByUUID returns the GPU with the given UUID.
func (s Snapshot) ByUUID(uuid string) (GPU, bool) {
	for _, g := range s.GPUs {
		if g.UUID == uuid {
			return g, true
		}
	}
	return GPU{}, false
}

// Health values.
const (
	Healthy   = "healthy"
	Unhealthy = "unhealthy"
)

// MIG mode values.
const (
	MIGDisabled    = "disabled"
	MIGEnabled     = "enabled"
	MIGUnsupported = "unsupported"
)

// GPU is one device's reading. Optional readings that NVML may not report on
// a given board are pointers and omitted from JSON when absent.
type GPU struct {
	Index      int    `json:"index"`
	UUID       string `json:"uuid"`
	Name       string `json:"name"`
	TotalBytes int64  `json:"total_bytes"`
	UsedBytes  int64  `json:"used_bytes"`
	FreeBytes  int64  `json:"free_bytes"`
	// UtilizationPct is the GPU's compute utilization over NVML's last
	// sample period, 0–100. Optional.
	UtilizationPct *int `json:"utilization_pct,omitempty"`
	// TemperatureC is the core temperature in °C. Optional.
	TemperatureC *int `json:"temperature_c,omitempty"`
	// MIG is disabled, enabled or unsupported.
	MIG string `json:"mig"`
	// Health is healthy or unhealthy; Reason says why when unhealthy.
	Health string `json:"health"`
	Reason string `json:"reason,omitempty"`
	// Processes are the compute processes holding memory on this GPU.
	Processes []Process `json:"processes"`
}

// IsHealthy reports whether the GPU's reading is complete and usable.
func (g GPU) IsHealthy() bool { return g.Health == Healthy }

// UsedPct is used ÷ total in percent (0 when total is unknown).
func (g GPU) UsedPct() float64 {
	if g.TotalBytes <= 0 {
		return 0
	}
	return 100 * float64(g.UsedBytes) / float64(g.TotalBytes)
}

// Process is a compute process on a GPU.
type Process struct {
	PID       int    `json:"pid"`
	Name      string `json:"name,omitempty"`
	UsedBytes int64  `json:"used_bytes"`
	// UsedUnknown is set when NVML cannot attribute memory to the process
	// (MIG, some virtualized setups); UsedBytes is then 0.
	UsedUnknown bool `json:"used_unknown,omitempty"`
}

// None is the CPU-only provider: it reports no GPUs.
type None struct{ now func() time.Time }

// NewNone returns the CPU-only provider.
func NewNone() *None { return &None{now: time.Now} }

// Name implements Provider.
func (*None) Name() string { return "none" }

// Snapshot implements Provider.
func (n *None) Snapshot(context.Context) (Snapshot, error) {
	return Snapshot{Taken: n.now(), Provider: "none", GPUs: []GPU{}}, nil
}

// Close implements Provider.
func (*None) Close() error { return nil }

var _ Provider = (*None)(nil)
