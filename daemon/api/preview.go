package api

// PlacementPreview is the answer of POST /v1/placement/preview: where the
// daemon would place a lease request (a LeaseRequest body: memory_bytes or
// model, device, priority; memory left out is [leases] default_memory) if
// it were made now. Nothing is granted or queued.
type PlacementPreview struct {
	// MemoryBytes is the request's size: given, estimated for its model, or
	// [leases] default_memory.
	MemoryBytes int64 `json:"memory_bytes"`
	// Fits: the request would be granted now on this GPU (or the CPU).
	Fits bool `json:"fits"`
	// Device is where it would run: "cuda:N" (the GPU's index on the
	// machine) or "cpu"; "" when no GPU can hold it.
	Device string `json:"device"`
	// GPUIndex is the chosen GPU (when nothing fits: the allowed GPU with
	// the most memory available); -1 for the CPU or none.
	GPUIndex int    `json:"gpu_index"`
	GPUUUID  string `json:"gpu_uuid,omitempty"`
	GPUName  string `json:"gpu_name,omitempty"`
	// AvailableBytes is what a new request can get on that GPU: the
	// accounting formula's available memory less HeldBytes.
	AvailableBytes int64 `json:"available_bytes"`
	// HeldBytes is the memory held there for waiting requests.
	HeldBytes int64  `json:"held_bytes"`
	Policy    string `json:"policy"`
	Reason    string `json:"reason"`
	// Estimate is the estimator's answer when the request named a model.
	Estimate any `json:"estimate,omitempty"`
}

// Registry is the body of GET /v1/models/registry: the models the daemon
// serves (its [[models.model]] entries and models_dir), each with the
// memory a lease for it gets and whether that fits on each GPU now.
type Registry struct {
	ModelsDir string `json:"models_dir"`
	// GPUs are the daemon's GPUs with the memory a new request can get
	// (available less the memory held for waiting requests).
	GPUs   []EstimateGPU   `json:"gpus"`
	Models []RegistryModel `json:"models"`
	// Partial names unfinished downloads in models_dir.
	Partial []string `json:"partial,omitempty"`
}

// RegistryModel is one model of the registry.
type RegistryModel struct {
	Name      string `json:"name"`
	Backend   string `json:"backend"`
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
	Origin    string `json:"origin"`
	Problem   string `json:"problem,omitempty"`
	Shadows   string `json:"shadows,omitempty"`
	// MemoryBytes is the entry's configured memory (0: estimated).
	MemoryBytes int64          `json:"memory_bytes,omitempty"`
	Estimate    *ModelEstimate `json:"estimate,omitempty"`
	// EstimateError says why there is no estimate.
	EstimateError string `json:"estimate_error,omitempty"`
}

// ModelEstimate is the memory a lease for a model gets and its fit per GPU.
type ModelEstimate struct {
	// Source is "memory" (the entry's memory) or "estimator".
	Source           string     `json:"source,omitempty"`
	Precision        string     `json:"precision,omitempty"`
	TotalBytes       int64      `json:"total_bytes"`
	RecommendedBytes int64      `json:"recommended_bytes"`
	GPUs             []ModelFit `json:"gpus"`
}

// ModelFit says whether a model fits on one GPU now and how many copies
// would.
type ModelFit struct {
	Index            int    `json:"index"`
	Name             string `json:"name"`
	AvailableBytes   int64  `json:"available_bytes"`
	RecommendedBytes int64  `json:"recommended_bytes"`
	Sufficient       bool   `json:"sufficient"`
	Copies           int64  `json:"copies"`
}
