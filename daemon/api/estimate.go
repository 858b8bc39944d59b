package api

// EstimateRequest is the body of POST /v1/estimate: one process to size
// (see the estimator package for the meaning of each field).
type EstimateRequest struct {
	// Backend is a memory profile: whisper.cpp, pytorch, faster-whisper, seed.
	Backend        string  `json:"backend"`
	Model          string  `json:"model"`
	ModelID        string  `json:"model_id,omitempty"`
	Precision      string  `json:"precision,omitempty"`
	Beam           int     `json:"beam,omitempty"`
	BestOf         int     `json:"best_of,omitempty"`
	Batch          int     `json:"batch,omitempty"`
	SegmentSeconds float64 `json:"segment_seconds,omitempty"`
	// FlashAttention is whisper.cpp's flash_attn; nil means its default (on).
	FlashAttention *bool `json:"flash_attention,omitempty"`
	Processors     int   `json:"processors,omitempty"`
	// Concurrency is the number of streams one instance serves at once.
	Concurrency int `json:"concurrency,omitempty"`
	// GPUs are the candidates; empty means the daemon's GPUs.
	GPUs     []EstimateGPU `json:"gpus,omitempty"`
	GPUModel string        `json:"gpu_model,omitempty"`
	// Driver is the NVIDIA driver version; empty means the daemon's.
	Driver string `json:"driver,omitempty"`
}

// EstimateGPU is one candidate GPU with the memory available on it.
type EstimateGPU struct {
	Index          int    `json:"index"`
	Name           string `json:"name"`
	AvailableBytes int64  `json:"available_bytes"`
}

// Estimate is the answer of POST /v1/estimate (and `wsched estimate --json`).
type Estimate struct {
	Backend          string            `json:"backend"`
	Model            string            `json:"model"`
	Precision        string            `json:"precision"`
	TotalBytes       int64             `json:"total_bytes"`
	RecommendedBytes int64             `json:"recommended_bytes"`
	FormulaBytes     int64             `json:"formula_bytes"`
	Source           string            `json:"source"`
	Breakdown        EstimateBreakdown `json:"breakdown"`
	GPUs             []EstimateFit     `json:"gpus"`
	Suggestions      []string          `json:"suggestions"`
	Explain          []string          `json:"explain"`
	Key              EstimateKey       `json:"key"`
	// WhisperCpp holds the buffer sizes as whisper.cpp logs them.
	WhisperCpp *WhisperCppBuffers `json:"whisper_cpp,omitempty"`
	// Streams splits the total into the shared and the per-stream part.
	Streams *EstimateStreams `json:"streams,omitempty"`
}

// EstimateStreams is the estimate for Concurrency streams in one instance.
type EstimateStreams struct {
	Concurrency        int      `json:"concurrency"`
	SharedBytes        int64    `json:"shared_bytes"`
	PerStreamBytes     int64    `json:"per_stream_bytes"`
	TotalBytes         int64    `json:"total_bytes"`
	ProcessPerJobBytes int64    `json:"process_per_job_bytes"`
	Shared             []string `json:"shared"`
	PerStream          []string `json:"per_stream"`
}

// EstimateFit says whether the process fits on one GPU and how many copies would.
type EstimateFit struct {
	Index            int    `json:"index"`
	Name             string `json:"name"`
	AvailableBytes   int64  `json:"available_bytes"`
	RecommendedBytes int64  `json:"recommended_bytes"`
	Sufficient       bool   `json:"sufficient"`
	Copies           int64  `json:"copies"`
}

// EstimateBreakdown splits TotalBytes into its components.
type EstimateBreakdown struct {
	Weights       int64 `json:"weights"`
	KVSelf        int64 `json:"kv_self"`
	KVCross       int64 `json:"kv_cross"`
	KVPad         int64 `json:"kv_pad"`
	Compute       int64 `json:"compute"`
	Context       int64 `json:"context"`
	ComputeConv   int64 `json:"compute_conv,omitempty"`
	ComputeEncode int64 `json:"compute_encode,omitempty"`
	ComputeCross  int64 `json:"compute_cross,omitempty"`
	ComputeDecode int64 `json:"compute_decode,omitempty"`
	CUDAPool      int64 `json:"cuda_pool,omitempty"`
	CUDARuntime   int64 `json:"cuda_runtime,omitempty"`
	Transient     int64 `json:"transient,omitempty"`
	Activations   int64 `json:"activations,omitempty"`
	Audio         int64 `json:"audio,omitempty"`
	Batch         int64 `json:"batch,omitempty"`
	Overhead      int64 `json:"overhead,omitempty"`
	Learned       int64 `json:"learned,omitempty"`
}

// EstimateKey is what a measured peak for the process is recorded under.
type EstimateKey struct {
	Backend   string `json:"backend"`
	Model     string `json:"model"`
	Precision string `json:"precision"`
	Beam      int    `json:"beam"`
	Batch     int    `json:"batch"`
	GPUModel  string `json:"gpu_model"`
	// Driver is the NVIDIA driver's major version, when known.
	Driver string `json:"driver,omitempty"`
	// Part is "" for a whole one-stream process, "stream" for what one
	// more stream of a shared instance adds (issue 26).
	Part string `json:"part,omitempty"`
}

// WhisperCppBuffers are whisper.cpp's init-time buffer sizes in bytes.
type WhisperCppBuffers struct {
	Device         string `json:"device"`
	FlashAttention bool   `json:"flash_attn"`
	Model          int64  `json:"model"`
	KVSelf         int64  `json:"kv_self"`
	KVCross        int64  `json:"kv_cross"`
	KVPad          int64  `json:"kv_pad"`
	ComputeConv    int64  `json:"compute_conv"`
	ComputeEncode  int64  `json:"compute_encode"`
	ComputeCross   int64  `json:"compute_cross"`
	ComputeDecode  int64  `json:"compute_decode"`
	HostCompute    int64  `json:"host_compute"`
}

// SamplesRequest is the body of POST /v1/estimator/samples: the measured
// peaks recorded under Key, or the measured CUDA contexts recorded for
// Context ("GPU model|driver major"); exactly one of the two.
type SamplesRequest struct {
	Key     *EstimateKey `json:"key,omitempty"`
	Context string       `json:"context,omitempty"`
}

// Samples is the answer: the measurements in the order they were recorded
// (the daemon keeps the latest few per key).
type Samples struct {
	Samples []int64 `json:"samples"`
}
