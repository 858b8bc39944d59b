// Package estimator predicts how much GPU memory a speech-to-text process
// will hold, per backend profile (whisper.cpp, PyTorch openai-whisper,
// faster-whisper, sherpa-onnx and the legacy "seed" formula), and corrects the prediction
// with peaks measured on real GPUs. It is pure: no clock, no I/O beyond what
// the caller hands in (a parsed model header, a Store of observations).
package estimator

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wsched/wsched/estimator/ggml"
	"github.com/wsched/wsched/estimator/onnx"
)

// Backend names a memory profile.
type Backend string

// Profiles.
const (
	WhisperCpp    Backend = "whisper.cpp"
	PyTorch       Backend = "pytorch"
	FasterWhisper Backend = "faster-whisper"
	Seed          Backend = "seed"
	// SherpaOnnx (sherpa.go) is declared with its profile.
)

// Backends lists the profiles in the order the CLI documents them.
// SherpaOnnx is not among them: it sizes model files (Request.ONNX), not
// model names.
var Backends = []Backend{WhisperCpp, PyTorch, FasterWhisper, Seed}

// Sentinel errors.
var (
	ErrUnknownBackend   = errors.New("unknown backend")
	ErrUnknownModel     = errors.New("unknown model")
	ErrUnknownPrecision = errors.New("unknown precision")
	ErrBadRequest       = errors.New("bad request")
)

// MaxConcurrency bounds Request.Concurrency: the streams one instance
// may serve ([[models.model]] max_streams is bounded alike,
// config.MaxStreamsLimit).
const MaxConcurrency = 256

// MiB and GiB are binary byte units.
const (
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
)

// Request describes one process to be placed.
type Request struct {
	Backend Backend `json:"backend"`
	// Model is a known model name ("medium", "large-v3-turbo", "base.en").
	// With Header set it only labels the result (a file name, say).
	Model string `json:"model"`
	// Header is a parsed ggml model file; its hparams and exact tensor sizes
	// replace the table's.
	Header *ggml.Model `json:"-"`
	// ONNX are the ONNX files of a sherpa-onnx model directory (the
	// sherpa-onnx profile sizes them by their initializers).
	ONNX []*onnx.Model `json:"-"`
	// ModelID is the identity learning keys on (the file's sha256, say);
	// empty means Model.
	ModelID string `json:"model_id,omitempty"`
	// Precision is the weight format: a ggml type for whisper.cpp ("f16",
	// "q5_0"), "fp16"/"fp32" for PyTorch, a CTranslate2 compute type for
	// faster-whisper ("float16", "int8_float16"), float32/float16/int8/int4
	// for seed. Empty means the profile's default.
	Precision string `json:"precision,omitempty"`
	// Beam is the beam size (1 or 0: greedy); BestOf the number of sampled
	// candidates when temperature fallback samples (0 or 1: none).
	Beam   int `json:"beam,omitempty"`
	BestOf int `json:"best_of,omitempty"`
	// Batch is the batch size (PyTorch, faster-whisper, seed).
	Batch int `json:"batch,omitempty"`
	// SegmentSeconds is the audio segment length; only the seed formula uses
	// it (whisper.cpp and the others work on fixed 30 s windows).
	SegmentSeconds float64 `json:"segment_seconds,omitempty"`
	// FlashAttention is whisper.cpp's flash_attn; nil means its default (on).
	FlashAttention *bool `json:"flash_attention,omitempty"`
	// Processors is whisper.cpp's n_processors: states sharing one copy of
	// the weights. 0 means 1.
	Processors int `json:"processors,omitempty"`
	// Concurrency is the number of jobs (decoding streams) one instance
	// serves at once, sharing its weights and context (Streams); 0 means 1.
	Concurrency int `json:"concurrency,omitempty"`
	// GPUs are the candidate devices with the memory available on each.
	GPUs []GPUFree `json:"gpus,omitempty"`
	// GPUModel selects learned values when GPUs is empty (NVML's name).
	GPUModel string `json:"gpu_model,omitempty"`
	// Driver is the NVIDIA driver version of the machine (learned values
	// are kept per driver major version); "" when unknown.
	Driver string `json:"driver,omitempty"`
}

// GPUFree is one candidate GPU.
type GPUFree struct {
	Index          int    `json:"index"`
	Name           string `json:"name"`
	AvailableBytes int64  `json:"available_bytes"`
}

// GPUFit says whether the process fits on one GPU and how many copies would.
type GPUFit struct {
	Index            int    `json:"index"`
	Name             string `json:"name"`
	AvailableBytes   int64  `json:"available_bytes"`
	RecommendedBytes int64  `json:"recommended_bytes"`
	Sufficient       bool   `json:"sufficient"`
	Copies           int64  `json:"copies"`
}

// Breakdown splits TotalBytes; the fields always add up to it. The first six
// are always present; the others belong to some profiles only.
type Breakdown struct {
	Weights int64 `json:"weights"`
	KVSelf  int64 `json:"kv_self"`
	KVCross int64 `json:"kv_cross"`
	KVPad   int64 `json:"kv_pad"`
	Compute int64 `json:"compute"`
	Context int64 `json:"context"`

	ComputeConv   int64 `json:"compute_conv,omitempty"`   // part of Compute
	ComputeEncode int64 `json:"compute_encode,omitempty"` // part of Compute
	ComputeCross  int64 `json:"compute_cross,omitempty"`  // part of Compute
	ComputeDecode int64 `json:"compute_decode,omitempty"` // part of Compute

	CUDAPool int64 `json:"cuda_pool,omitempty"`
	// CUDARuntime is whisper.cpp's CUDA overhead beyond context and
	// buffers: cuBLAS workspace, kernel images, CUDA graphs.
	CUDARuntime int64 `json:"cuda_runtime,omitempty"`
	Transient   int64 `json:"transient,omitempty"`
	Activations int64 `json:"activations,omitempty"`
	Audio       int64 `json:"audio,omitempty"`
	Batch       int64 `json:"batch,omitempty"`
	Overhead    int64 `json:"overhead,omitempty"`
	Learned     int64 `json:"learned,omitempty"`
}

// Sum adds the additive components (the compute_* details are inside Compute).
func (b Breakdown) Sum() int64 {
	return b.Weights + b.KVSelf + b.KVCross + b.KVPad + b.Compute + b.Context +
		b.CUDAPool + b.CUDARuntime + b.Transient + b.Activations + b.Audio + b.Batch + b.Overhead + b.Learned
}

// Result is an estimate, as `wsched estimate --json` and POST /v1/estimate
// return it.
type Result struct {
	Backend   Backend `json:"backend"`
	Model     string  `json:"model"`
	Precision string  `json:"precision"`
	// TotalBytes is what the process is expected to hold at its peak:
	// max(formula, learned).
	TotalBytes int64 `json:"total_bytes"`
	// RecommendedBytes adds the profile's safety margin; placement uses it.
	RecommendedBytes int64 `json:"recommended_bytes"`
	// FormulaBytes is the profile's own figure before learning.
	FormulaBytes int64 `json:"formula_bytes"`
	// Source is "formula" or "learned": which one set TotalBytes.
	Source      string    `json:"source"`
	Breakdown   Breakdown `json:"breakdown"`
	GPUs        []GPUFit  `json:"gpus"`
	Suggestions []string  `json:"suggestions"`
	Explain     []string  `json:"explain"`
	// Key is what a measured peak for this process should be recorded under.
	Key Key `json:"key"`
	// WhisperCpp holds the buffer sizes as whisper.cpp logs them (whisper.cpp
	// profile only).
	WhisperCpp *WhisperCppBuffers `json:"whisper_cpp,omitempty"`
	// Streams splits the estimate into the shared and the per-stream part;
	// TotalBytes is for Streams.Concurrency streams in one instance.
	Streams *Streams `json:"streams,omitempty"`
}

// Config tunes an Estimator; zero fields take the defaults.
type Config struct {
	// CUDAContextBytes is [estimator] cuda_context; 0 means by GPU (the
	// overhead row of the GPU model, OverheadFor), a value overrides it.
	CUDAContextBytes int64
	// Margin is the safety margin of RecommendedBytes over TotalBytes for
	// formula profiles (default 0.10; the seed profile keeps its own 20%).
	Margin float64
	// LearnPercentile is the percentile of observed peaks used (default 0.95).
	LearnPercentile float64
	// LearnMargin is added on top of that percentile (0: default 0.10;
	// negative: none).
	LearnMargin float64
	// Device is the whisper.cpp backend device: "cuda" (default) or "cpu".
	Device string
}

func (c Config) withDefaults() Config {
	c.CUDAContextBytes = max(c.CUDAContextBytes, 0)
	if c.Margin <= 0 {
		c.Margin = 0.10
	}
	if c.LearnPercentile <= 0 || c.LearnPercentile > 1 {
		c.LearnPercentile = 0.95
	}
	if c.LearnMargin < 0 {
		c.LearnMargin = 0
	} else if c.LearnMargin == 0 {
		c.LearnMargin = 0.10
	}
	if c.Device == "" {
		c.Device = "cuda"
	}
	return c
}

// Estimator computes estimates with a configuration and, optionally, a store
// of observations to learn from.
type Estimator struct {
	cfg   Config
	store Store
}

// New returns an Estimator; store may be nil (formula only).
func New(cfg Config, store Store) *Estimator {
	return &Estimator{cfg: cfg.withDefaults(), store: store}
}

// Estimate is New(Config{}, nil).Estimate(req): the formula with defaults.
func Estimate(req Request) (Result, error) { return New(Config{}, nil).Estimate(req) }

// formula is what a profile computes before learning and GPU fitting.
type formula struct {
	model, precision string
	breakdown        Breakdown
	margin           float64 // RecommendedBytes = ceil(total*(1+margin))
	explain          []string
	suggestions      []string
	whisper          *WhisperCppBuffers
	key              Key
}

// Estimate computes the estimate for req.
func (e *Estimator) Estimate(req Request) (Result, error) {
	req, err := normalize(req)
	if err != nil {
		return Result{}, err
	}
	gpuModel := req.GPUModel
	if gpuModel == "" && len(req.GPUs) > 0 {
		gpuModel = req.GPUs[0].Name
	}
	res, err := e.estimateOn(req, gpuModel)
	if err != nil {
		return Result{}, err
	}
	res.GPUs = []GPUFit{}
	for _, g := range req.GPUs {
		rec := res.RecommendedBytes
		if g.Name != gpuModel {
			other, err := e.estimateOn(req, g.Name)
			if err != nil {
				return Result{}, err
			}
			rec = other.RecommendedBytes
		}
		res.GPUs = append(res.GPUs, fit(g, rec))
	}
	return res, nil
}

func (e *Estimator) estimateOn(req Request, gpuModel string) (Result, error) {
	req.GPUModel = gpuModel
	f, err := e.profile(req)
	if err != nil {
		return Result{}, err
	}
	f.key.GPUModel, f.key.Driver = gpuModel, DriverMajor(req.Driver)
	if err := e.applyLearnedContext(&f, gpuModel, req.Driver); err != nil {
		return Result{}, err
	}
	res := Result{
		Backend: req.Backend, Model: f.model, Precision: f.precision,
		FormulaBytes: f.breakdown.Sum(), Source: "formula", Breakdown: f.breakdown,
		Suggestions: f.suggestions, Explain: f.explain, Key: f.key, WhisperCpp: f.whisper,
	}
	if res.Suggestions == nil {
		res.Suggestions = []string{}
	}
	res.TotalBytes = res.FormulaBytes
	res.RecommendedBytes = ceilMul(res.TotalBytes, 1+f.margin)
	if err := e.applyLearned(&res); err != nil {
		return Result{}, err
	}
	stream, err := e.learnedStream(&res)
	if err != nil {
		return Result{}, err
	}
	applyStreams(&res, req.Concurrency, f.margin, stream)
	return res, nil
}

func (e *Estimator) profile(req Request) (formula, error) {
	switch req.Backend {
	case WhisperCpp:
		return e.whisperCpp(req)
	case PyTorch:
		return e.pytorch(req)
	case FasterWhisper:
		return e.fasterWhisper(req)
	case Seed:
		return seedFormula(req)
	case SherpaOnnx:
		return e.sherpaOnnx(req)
	}
	return formula{}, fmt.Errorf("estimate: backend %q: %w", req.Backend, ErrUnknownBackend)
}

func normalize(req Request) (Request, error) {
	if req.Backend == "" {
		req.Backend = WhisperCpp
	}
	req.Model = strings.TrimSpace(req.Model)
	if req.Model == "" && req.Header == nil && len(req.ONNX) == 0 {
		return req, fmt.Errorf("estimate: no model given: %w", ErrBadRequest)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"beam", req.Beam}, {"best_of", req.BestOf}, {"batch", req.Batch}, {"processors", req.Processors}} {
		if f.v < 0 || f.v > 1024 {
			return req, fmt.Errorf("estimate: %s %d out of range: want 0 to 1024: %w", f.name, f.v, ErrBadRequest)
		}
	}
	if err := CheckConcurrency("concurrency", req.Concurrency); err != nil {
		return req, fmt.Errorf("estimate: %w", err)
	}
	if req.SegmentSeconds < 0 || req.SegmentSeconds > 24*3600 {
		return req, fmt.Errorf("estimate: segment %.0f s out of range: %w", req.SegmentSeconds, ErrBadRequest)
	}
	for _, g := range req.GPUs {
		if g.AvailableBytes < 0 {
			return req, fmt.Errorf("estimate: GPU %d available %d bytes: %w", g.Index, g.AvailableBytes, ErrBadRequest)
		}
	}
	return req, nil
}

// CheckConcurrency refuses a concurrency outside 1 to MaxConcurrency (0:
// absent, one stream) naming it as name ("--concurrency", "concurrency").
func CheckConcurrency(name string, v int) error {
	if v < 0 || v > MaxConcurrency {
		return fmt.Errorf("%s %d: want 1 to %d: %w", name, v, MaxConcurrency, ErrBadRequest)
	}
	return nil
}

// decoders is how many sequences are decoded at once: max(beam, best_of).
func (r Request) decoders() int {
	return max(1, r.Beam, r.BestOf)
}

func (r Request) batch() int { return max(1, r.Batch) }

func fit(g GPUFree, rec int64) GPUFit {
	f := GPUFit{Index: g.Index, Name: g.Name, AvailableBytes: g.AvailableBytes, RecommendedBytes: rec}
	if rec > 0 {
		f.Copies = g.AvailableBytes / rec
	}
	f.Sufficient = f.Copies >= 1
	return f
}

func ceilMul(b int64, f float64) int64 {
	v := float64(b) * f
	n := int64(v)
	if float64(n) < v {
		n++
	}
	return n
}
