package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/estimator/ggml"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/modelid"
	"github.com/wsched/wsched/internal/units"
)

// estimateFlags are the options of `wsched estimate`.
type estimateFlags struct {
	model, backend, precision  string
	beam, bestOf, batch, procs int
	concurrency                int
	segment                    secondsValue
	flashAttn                  bool
	gpu                        int
	fits, cudaContext          string
	explain, asJSON, noDaemon  bool
}

// estimateView is what `wsched estimate --json` prints: the estimator's
// Result (absent when only --fits was asked), the model file it read, and
// the largest model that fits each amount of memory asked about.
type estimateView struct {
	*estimator.Result
	ModelFile *modelFile     `json:"model_file,omitempty"`
	Largest   []largestModel `json:"largest_model,omitempty"`
	// GPUSource says whose view of the GPUs the fit lines use: the
	// daemon's (leases and held memory counted) or a local reading.
	GPUSource string `json:"gpu_source"`
	// Placement is where the daemon would place a lease of the
	// recommended size now (absent without a daemon).
	Placement *api.PlacementPreview `json:"placement,omitempty"`
}

// modelFile describes a --model PATH.
type modelFile struct {
	Path        string       `json:"path"`
	FileBytes   int64        `json:"file_bytes"`
	ModelID     string       `json:"model_id,omitempty"`
	SHA256      string       `json:"sha256,omitempty"`
	WeightType  string       `json:"weight_type"`
	WeightBytes int64        `json:"weight_bytes"`
	Empty       bool         `json:"empty"`
	HParams     ggml.HParams `json:"hparams"`
}

// largestModel is the seed's assign_optimal_model for one amount of memory.
type largestModel struct {
	GPU              *int   `json:"gpu,omitempty"`
	AvailableBytes   int64  `json:"available_bytes"`
	Model            string `json:"model"`
	RecommendedBytes int64  `json:"recommended_bytes"`
	Fits             bool   `json:"fits"`
}

func newEstimateCmd(a *app) *cobra.Command {
	var f estimateFlags
	cmd := &cobra.Command{
		Use:   "estimate --model NAME|PATH [DIR]",
		Short: "Estimate the GPU memory a speech-to-text process will need",
		Long: `Estimate the GPU memory a Whisper process holds at its peak, per backend
profile: whisper.cpp (exact from the model file or the known model's
dimensions), pytorch (openai-whisper), faster-whisper (CTranslate2) and seed
(the old calculator, for comparison). Shows the total, the recommendation with
the profile's margin, a breakdown, whether it fits on each GPU (available
memory by wsched's accounting formula) and how many copies would, and
suggestions that lower memory for the chosen backend.

--model is a known model name (tiny, base, small, medium, large-v1/v2/v3,
large-v3-turbo, .en variants; large = large-v3, turbo = large-v3-turbo) or the
path of a whisper.cpp ggml model file, whose header is read; with
--backend sherpa-onnx, a sherpa-onnx model directory (given as --model or as
the argument), whose ONNX files' initializers are read. --fits SIZE
names the largest model whose recommendation fits SIZE (the seed's
assign_optimal_model); --fits gpus does so for each GPU.`,
		Example: `  wsched estimate --model medium
  wsched estimate --model medium --backend seed --segment 60s --batch 2
  wsched estimate --model ggml-large-v3-q5_0.bin --beam 5 --explain
  wsched estimate --fits 8GiB --backend faster-whisper --precision int8
  wsched estimate --model small --json
  wsched estimate --backend sherpa-onnx /srv/models/sensevoice --explain`,
		Args: modelDirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && f.model == "" { // wsched estimate --backend sherpa-onnx DIR
				f.model = args[0]
			}
			return a.estimate(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "known model name or path of a ggml model file")
	fl.StringVar(&f.backend, "backend", string(estimator.WhisperCpp), "profile: "+backendNames())
	fl.StringVar(&f.precision, "precision", "", "weights: whisper.cpp f16|f32|q8_0|q5_0|q4_0|…; pytorch fp16|fp32;\nfaster-whisper float16|int8_float16|int8|float32; seed float32|float16|int8|int4\n(default: the backend's)")
	fl.IntVar(&f.beam, "beam", 0, "beam size (0 or 1: greedy)")
	fl.IntVar(&f.bestOf, "best-of", 0, "sampled candidates on temperature fallback (whisper.cpp's best_of)")
	fl.IntVar(&f.batch, "batch", 0, "batch size (pytorch, faster-whisper, seed)")
	fl.IntVar(&f.procs, "processors", 0, "whisper.cpp parallel states sharing one copy of the weights")
	fl.IntVar(&f.concurrency, "concurrency", 0, "jobs (streams) served at once by one instance sharing weights and context;\nthe total is for all of them (--explain: shared and per-stream parts)")
	fl.Var(&f.segment, "segment", "audio segment length, \"30s\" or seconds (seed only; the others work on 30s windows)")
	fl.BoolVar(&f.flashAttn, "flash-attn", true, "whisper.cpp flash attention")
	fl.IntVar(&f.gpu, "gpu", 0, "only this GPU index (default: all GPUs)")
	fl.StringVar(&f.fits, "fits", "", "largest model whose recommendation fits SIZE (\"8GiB\"), or \"gpus\" for each GPU")
	fl.StringVar(&f.cudaContext, "cuda-context", "", "per-process CUDA context (default [estimator] cuda_context)")
	fl.BoolVar(&f.explain, "explain", false, "show how the estimate was reached")
	fl.BoolVar(&f.asJSON, "json", false, "print JSON")
	fl.BoolVar(&f.noDaemon, "no-daemon", false, "do not ask a running daemon for what it has measured (formula only)")
	return cmd
}

func (a *app) estimate(cmd *cobra.Command, f estimateFlags) error {
	ctx := cmd.Context()
	if f.model == "" && f.fits == "" {
		return errors.New("estimate: --model NAME|PATH is required (or --fits SIZE for the largest model that fits)")
	}
	if err := estimator.CheckConcurrency("--concurrency", f.concurrency); err != nil {
		return fmt.Errorf("estimate: %w", err)
	}
	backend, err := parseBackend(f.backend)
	if err != nil {
		return err
	}
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	ecfg, err := f.config(cfg)
	if err != nil {
		return err
	}
	req := f.request(backend, cmd.Flags().Changed("flash-attn"))
	only := -1
	if cmd.Flags().Changed("gpu") {
		only = f.gpu
	}
	var view estimateView
	var daemon *client.Client
	if !f.noDaemon {
		daemon = client.New(cfg.Daemon.Socket)
		defer daemon.Close()
	}
	read, err := a.estimateGPUs(ctx, cfg, only, daemon)
	if err != nil {
		return err
	}
	req.GPUs, req.Driver, view.GPUSource = read.gpus, read.driver, read.source
	if !read.daemon {
		daemon = nil // no placement preview
	}
	var store estimator.Store
	learning := "learning: --no-daemon: measured peaks not consulted, the formula applies"
	if !f.noDaemon {
		store, learning = learnedStore(ctx, cfg)
	}
	est := estimator.New(ecfg, store)
	if f.model != "" {
		hashes := modelid.Cache{Dir: a.hashCacheDir()}
		if view.ModelFile, err = resolveModelFlag(ctx, &req, f.model, f.asJSON, hashes); err != nil {
			return err
		}
		res, err := est.Estimate(req)
		if err != nil {
			return err
		}
		res.Explain = append(res.Explain, cliExplain(res, view.ModelFile, learning)...)
		view.Result = &res
		req.Precision = res.Precision // the largest model in the same format
		view.Placement = daemonPlacement(ctx, daemon, res.RecommendedBytes, only)
	}
	if f.fits != "" {
		if view.Largest, err = largestModels(est, req, f.fits); err != nil {
			return err
		}
	}
	if f.asJSON {
		enc := json.NewEncoder(a.out)
		enc.SetIndent("", "  ")
		return enc.Encode(view)
	}
	return writeEstimate(a.out, view, req, f.explain)
}

// config is the estimator's configuration: [estimator] with --cuda-context
// over it.
func (f estimateFlags) config(cfg *config.Config) (estimator.Config, error) {
	ecfg := estimator.Config{CUDAContextBytes: cfg.Estimator.CUDAContext.Int64()}
	if f.cudaContext != "" {
		b, err := units.ParseBytes(f.cudaContext)
		if err != nil {
			return ecfg, fmt.Errorf("estimate: --cuda-context: %w", err)
		}
		ecfg.CUDAContextBytes = b
	}
	return ecfg, nil
}

// request is the estimator request the flags describe, without model and
// GPUs; flashAttnSet says whether --flash-attn was given.
func (f estimateFlags) request(b estimator.Backend, flashAttnSet bool) estimator.Request {
	req := estimator.Request{
		Backend: b, Precision: f.precision, Beam: f.beam, BestOf: f.bestOf, Batch: f.batch,
		Processors: f.procs, SegmentSeconds: float64(f.segment),
	}
	req.Concurrency = f.concurrency
	if flashAttnSet {
		fa := f.flashAttn
		req.FlashAttention = &fa
	}
	return req
}

// secondsValue is --segment: a Go duration ("30s", "10m") or a bare number
// of seconds.
type secondsValue float64

func (s *secondsValue) String() string {
	if *s == 0 {
		return "0"
	}
	return time.Duration(float64(*s) * float64(time.Second)).String()
}

func (s *secondsValue) Set(v string) error {
	if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%q: want a non-negative length", v)
		}
		*s = secondsValue(f)
		return nil
	}
	d, err := units.ParseDuration(v)
	if err != nil {
		return err
	}
	*s = secondsValue(d.Seconds())
	return nil
}

func (s *secondsValue) Type() string { return "duration" }

// parseBackend accepts the profile names and a few common spellings.
func parseBackend(s string) (estimator.Backend, error) {
	n := strings.ToLower(strings.TrimSpace(s))
	switch n {
	case "whispercpp", "whisper-cpp", "whisper_cpp":
		n = string(estimator.WhisperCpp)
	case "openai-whisper", "torch":
		n = string(estimator.PyTorch)
	case "faster_whisper", "ctranslate2":
		n = string(estimator.FasterWhisper)
	}
	for _, b := range estimator.Backends {
		if string(b) == n {
			return b, nil
		}
	}
	if d, ok := profileBackend(n); ok { // a profile that sizes a backend's model files
		return estimator.Backend(d.Profile), nil
	}
	return "", fmt.Errorf("estimate: unknown backend %q (allowed: %s, %s): %w", s, backendNames(), profiles(), estimator.ErrUnknownBackend)
}

func backendNames() string {
	names := make([]string, len(estimator.Backends))
	for i, b := range estimator.Backends {
		names[i] = string(b)
	}
	return strings.Join(names, ", ")
}

func knownModelNames() string {
	var names []string
	for _, m := range estimator.KnownModels() {
		names = append(names, m.Name)
	}
	return strings.Join(names, ", ")
}

// resolveModelFlag sets req's model from --model: an existing file is read
// as a ggml model, named for learning by its cheap identity (head digest +
// size) and, with fullHash (--json), its sha256 from the hash cache;
// anything else is a known model name, which the estimator checks.
func resolveModelFlag(ctx context.Context, req *estimator.Request, arg string, fullHash bool, hashes modelid.Cache) (*modelFile, error) {
	st, err := os.Stat(arg)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, known := estimator.LookupModel(arg); !known && strings.ContainsRune(arg, filepath.Separator) {
			return nil, fmt.Errorf("estimate: model file %s does not exist (known model names: %s)", arg, knownModelNames())
		}
		req.Model = arg
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("estimate: model file: %w", err)
	case st.IsDir():
		return nil, readModelDir(req, arg)
	case !st.Mode().IsRegular():
		return nil, notRegular(arg, st.Mode())
	}
	h, err := readModelFile(arg, st.Size())
	if err != nil {
		return nil, err
	}
	mf := &modelFile{Path: arg, FileBytes: h.FileBytes, WeightType: h.WeightType().String(),
		WeightBytes: h.WeightBytes, Empty: h.Empty, HParams: h.HParams}
	req.Header = h
	if req.Backend != estimator.WhisperCpp {
		// The other backends do not load ggml files: only the dimensions
		// count, and the model is named by its family.
		return mf, nil
	}
	req.Model = filepath.Base(arg)
	if req.ModelID, err = modelid.Cheap(arg); err != nil {
		return nil, fmt.Errorf("estimate: %w", err)
	}
	mf.ModelID = req.ModelID
	if fullHash {
		if mf.SHA256, err = hashes.SHA256(ctx, arg); err != nil {
			return nil, fmt.Errorf("estimate: %w", err)
		}
	}
	return mf, nil
}

// notRegular refuses a FIFO, socket or device named by --model: reading
// one could block forever.
func notRegular(path string, mode fs.FileMode) error {
	kind := "special file"
	switch {
	case mode&fs.ModeNamedPipe != 0:
		kind = "FIFO"
	case mode&fs.ModeSocket != 0:
		kind = "socket"
	case mode&fs.ModeDevice != 0:
		kind = "device"
	}
	return fmt.Errorf("estimate: model %s is not a regular file (a %s); --model takes a ggml .bin file or a known model name: %s",
		path, kind, knownModelNames())
}

// readModelFile reads a model file's header. It opens without blocking
// (a FIFO put in the file's place since the Stat cannot stall the open)
// and reads only a regular file.
func readModelFile(path string, size int64) (*ggml.Model, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("estimate: open model file: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("estimate: stat model file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, notRegular(path, st.Mode())
	}
	h, err := ggml.Read(fh, size)
	switch {
	case errors.Is(err, ggml.ErrBadMagic):
		return nil, fmt.Errorf("estimate: %s is not a whisper.cpp ggml model file (%w); --model takes a ggml .bin file or a known model name: %s",
			path, err, knownModelNames())
	case err != nil:
		return nil, fmt.Errorf("estimate: read model file %s: %w", path, err)
	}
	return h, nil
}

// hashCacheDir is where full model hashes are cached: $WSCHED_CACHE_DIR,
// else $XDG_CACHE_HOME/wsched, else $HOME/.cache/wsched (each + /sha256);
// "" (no cache) when none is set.
func (a *app) hashCacheDir() string {
	if d, ok := a.lookupEnv("WSCHED_CACHE_DIR"); ok && d != "" {
		return filepath.Join(d, "sha256")
	}
	if d, ok := a.lookupEnv("XDG_CACHE_HOME"); ok && d != "" {
		return filepath.Join(d, "wsched", "sha256")
	}
	if d, ok := a.lookupEnv("HOME"); ok && d != "" {
		return filepath.Join(d, ".cache", "wsched", "sha256")
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// largestModels answers --fits: one amount of memory, or each GPU's.
func largestModels(est *estimator.Estimator, req estimator.Request, fits string) ([]largestModel, error) {
	type amount struct {
		gpu   *int
		bytes int64
	}
	var amounts []amount
	if strings.EqualFold(fits, "gpus") {
		for _, g := range req.GPUs {
			amounts = append(amounts, amount{&g.Index, g.AvailableBytes})
		}
	} else {
		b, err := units.ParseBytes(fits)
		if err != nil {
			return nil, fmt.Errorf("estimate: --fits: %w (or \"gpus\")", err)
		}
		amounts = append(amounts, amount{nil, b})
	}
	out := []largestModel{}
	for _, am := range amounts {
		name, res, ok, err := est.LargestModel(req, am.bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, largestModel{GPU: am.gpu, AvailableBytes: am.bytes, Model: name, RecommendedBytes: res.RecommendedBytes, Fits: ok})
	}
	return out, nil
}

// cliExplain adds what the command knows beyond the estimator: the file
// read, and where measurements came from (learning).
func cliExplain(r estimator.Result, mf *modelFile, learning string) []string {
	var out []string
	if mf != nil {
		line := fmt.Sprintf("model file %s: %d bytes, %s weights, %s", mf.Path, mf.FileBytes, mf.WeightType, units.FormatBytes(mf.WeightBytes))
		if mf.ModelID != "" {
			line += ", identity " + mf.ModelID
		}
		if mf.SHA256 != "" {
			line += ", sha256 " + mf.SHA256
		}
		if r.Backend != estimator.WhisperCpp {
			line += fmt.Sprintf("; %s does not load ggml files, only the model's dimensions are used", r.Backend)
		}
		out = append(out, line)
	}
	return append(out, "learning key: "+r.Key.String(), learning)
}

func writeEstimate(w io.Writer, v estimateView, req estimator.Request, explain bool) error {
	if v.Result != nil {
		if err := v.Result.WriteText(w, explain); err != nil {
			return err
		}
		if len(v.GPUs) == 0 {
			fmt.Fprintln(w, "gpus: none found; sufficient/copies need a GPU reading")
		}
		fmt.Fprintln(w, v.GPUSource)
		writePlacement(w, v.Placement)
	}
	if len(v.Largest) == 0 {
		return nil
	}
	prec := req.Precision
	if prec == "" {
		prec = "default precision"
	}
	fmt.Fprintf(w, "largest model that fits (%s, %s):\n", req.Backend, prec)
	for _, l := range v.Largest {
		where := availableLabel(l)
		if !l.Fits {
			fmt.Fprintf(w, "  %s: none fits (%s needs %s)\n", where, l.Model, units.FormatBytes(l.RecommendedBytes))
			continue
		}
		fmt.Fprintf(w, "  %s: %s (recommended %s)\n", where, l.Model, units.FormatBytes(l.RecommendedBytes))
	}
	return nil
}

// availableLabel names the memory a largest-model answer is for.
func availableLabel(l largestModel) string {
	if l.GPU != nil {
		return fmt.Sprintf("gpu %d, %s available", *l.GPU, units.FormatBytes(l.AvailableBytes))
	}
	return units.FormatBytes(l.AvailableBytes)
}
