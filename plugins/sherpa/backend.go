// Package sherpa is wsched's sherpa-onnx backend: a plugins.Backend that
// loads SenseVoice, Paraformer and Whisper ONNX model directories as
// sherpa-onnx offline recognizers (github.com/k2-fsa/sherpa-onnx-go-linux,
// which bundles libsherpa-onnx-c-api and ONNX Runtime), cuts long audio
// with silero VAD or into fixed windows, and streams progress and one
// segment per piece. cmd/wsched-backend-sherpa serves it as a plugin.
//
// The bundled ONNX Runtime is CPU-only: a GPU device runs on the CUDA
// provider only where libonnxruntime_providers_cuda.so sits next to
// libonnxruntime.so; otherwise the model loads on the CPU with a warning.
package sherpa

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/internal/audio"
	"github.com/wsched/wsched/plugins/internal/streamgate"
	"github.com/wsched/wsched/plugins/sherpa/modeldir"
)

// Name is the backend's name: its binary is wsched-backend-sherpa.
const Name = "sherpa"

// FFmpegNone in Options.FFmpeg turns the ffmpeg fallback off.
const FFmpegNone = audio.FFmpegNone

// Options configure a Backend; the zero value works.
type Options struct {
	Log     *slog.Logger // nil: discard
	Version string       // Info's version; "" means "dev"
	// FFmpeg decodes audio that is not PCM/float WAV: "" looks "ffmpeg" up
	// on PATH, FFmpegNone disables it, anything else is its path.
	FFmpeg string
	// MaxStreams is how many Transcribe calls run at once on a loaded
	// model, their pieces decoded together (0: modeldir.MaxStreams); a
	// Load's Extra["max_streams"] overrides it for that model.
	MaxStreams int
	// BatchWindow is how long a piece waits for the other calls' pieces
	// before its batch decodes (0: DefaultBatchWindow).
	BatchWindow time.Duration
}

// Backend is sherpa-onnx as a plugins.Backend. It holds one recognizer and
// serves up to max_streams Transcribe calls at once (issue 26): each
// decodes and cuts its audio on its own, and the pieces of the calls in
// flight are decoded together, one DecodeStreams per batch (see batcher);
// further calls wait. Load and Unload wait for the calls in flight.
type Backend struct {
	opts Options
	log  *slog.Logger
	gate *streamgate.Gate // streams in flight, or Load/Unload alone
	cuda string           // the CUDA provider library; "" when ONNX Runtime has none

	mu    sync.Mutex
	model *model // nil when none is loaded
}

var _ plugins.Backend = (*Backend)(nil)

// New returns a Backend with no model loaded.
func New(opts Options) *Backend {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = modeldir.MaxStreams
	}
	if opts.BatchWindow <= 0 {
		opts.BatchWindow = DefaultBatchWindow
	}
	return &Backend{opts: opts, log: log, gate: streamgate.New(opts.MaxStreams), cuda: cudaProvider()}
}

// Info reports the backend, its ONNX Runtime's providers, the loaded model
// (directory, kind, device, provider) and the CUDA_VISIBLE_DEVICES /
// CUDA_DEVICE_ORDER the process was started with.
func (b *Backend) Info(ctx context.Context) (plugins.Info, error) {
	kinds, providers := []string{"cpu"}, "cpu"
	if b.cuda != "" {
		kinds, providers = append(kinds, "cuda"), "cpu, cuda ("+b.cuda+")"
	}
	version := b.opts.Version
	if version == "" {
		version = "dev"
	}
	meta := map[string]string{
		"sherpa_onnx": SherpaVersion, "onnxruntime_providers": providers, "ffmpeg": b.ffmpeg(),
		"gpu_mem_limit": "not settable: sherpa-onnx's C API has no ONNX Runtime provider options",
	}
	for _, name := range []string{"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"} {
		if v, ok := os.LookupEnv(name); ok {
			meta["env."+name] = v
		}
	}
	b.mu.Lock()
	if m := b.model; m != nil {
		meta["model"], meta["kind"], meta["device"], meta["provider"] = m.dir.Path, string(m.dir.Kind), m.device, m.provider
		meta["threads"], meta["vad"] = strconv.Itoa(m.threads), strconv.FormatBool(m.vadModel != "")
		meta["max_streams"] = strconv.Itoa(m.maxStreams)
		if m.dir.Kind == modeldir.SenseVoice {
			meta["language"], meta["itn"] = m.language, strconv.FormatBool(m.itn)
		}
	}
	b.mu.Unlock()
	return plugins.Info{Name: Name, Version: version, ModelFormats: []string{"onnx"}, Devices: kinds, Metadata: meta, Descriptor: modeldir.Descriptor()}, nil
}

// SherpaVersion is the sherpa-onnx Go module this backend is built on.
const SherpaVersion = "v1.12.0"

// Health is always fine: sherpa-onnx has no state that breaks.
func (b *Backend) Health(ctx context.Context) error { return ctx.Err() }

// Unload frees the recognizer once the calls in flight have ended.
func (b *Backend) Unload(ctx context.Context) error {
	if err := b.gate.Acquire(ctx, true); err != nil {
		return fmt.Errorf("sherpa unload: %w", err)
	}
	defer b.gate.Release(true)
	b.unloadLocked()
	return nil
}

// unloadLocked frees the model; the caller holds the gate exclusively.
func (b *Backend) unloadLocked() {
	b.mu.Lock()
	m := b.model
	b.model = nil
	b.mu.Unlock()
	if m != nil {
		m.free()
		b.log.Info("unloaded model", "model", m.dir.Path)
	}
}

// ffmpeg returns the ffmpeg to use, or "".
func (b *Backend) ffmpeg() string { return audio.FFmpegPath(b.opts.FFmpeg) }
