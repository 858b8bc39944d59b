package api

import (
	"time"

	"github.com/wsched/wsched/plugins/descriptor"
)

// Backends is the body of GET /v1/backends: the directories searched, the
// backends found there, the files refused, and the warm instances.
type Backends struct {
	Dirs      []string          `json:"dirs"`
	Backends  []Backend         `json:"backends"`
	Refused   []RefusedBackend  `json:"refused"`
	Instances []BackendInstance `json:"instances"`
}

// Backend is one discovered backend executable and what its Info says.
type Backend struct {
	Name         string            `json:"name"`
	Path         string            `json:"path"`
	Version      string            `json:"version,omitempty"`
	ModelFormats []string          `json:"model_formats,omitempty"`
	Devices      []string          `json:"devices,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	// Descriptor is what the backend says about itself: the backend name
	// models name, how its models are found and sized, its options, the
	// devices this build can use.
	Descriptor *descriptor.Descriptor `json:"descriptor,omitempty"`
	// Error says why the backend did not answer Info.
	Error string `json:"error,omitempty"`
}

// RefusedBackend is a file (or directory) the daemon will not run, and why.
type RefusedBackend struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// BackendInstance is a backend process with a model loaded under a lease.
type BackendInstance struct {
	ID      string `json:"id"`
	Backend string `json:"backend"`
	Model   string `json:"model"`
	// State is starting, idle, busy, checking, restarting or stopping.
	State    string `json:"state"`
	Lease    string `json:"lease"`
	GPUIndex int    `json:"gpu_index"` // -1 for cpu
	GPUUUID  string `json:"gpu_uuid,omitempty"`
	PID      int    `json:"pid,omitempty"`
	// MemoryBytes is the lease's size; ReportedBytes what the backend said
	// it allocated when it loaded the model.
	MemoryBytes   int64 `json:"memory_bytes"`
	ReportedBytes int64 `json:"reported_bytes"`
	// Reported is the backend's own memory report by buffer (model,
	// kv_self, kv_cross, kv_pad, compute_NAME), in bytes.
	Reported map[string]int64 `json:"reported,omitempty"`
	// Metadata is what the running process's Info said (whisper.cpp version,
	// the device and the CUDA_VISIBLE_DEVICES it was started with, …).
	Metadata         map[string]string `json:"metadata,omitempty"`
	Started          time.Time         `json:"started,omitzero"`
	LastUsed         time.Time         `json:"last_used,omitzero"`
	IdleSeconds      float64           `json:"idle_seconds"`
	KeepAliveSeconds float64           `json:"keep_alive_seconds"`
	Restarts         int               `json:"restarts"`
	Failed           string            `json:"failed,omitempty"`
	// Streams is how many jobs the instance serves now, MaxStreams the most
	// it takes ([[models.model]] max_streams) and PeakStreams the most it
	// has served at once (issue 26).
	Streams     int `json:"streams"`
	MaxStreams  int `json:"max_streams"`
	PeakStreams int `json:"peak_streams"`
}
