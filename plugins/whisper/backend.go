//go:build whisper

package whisper

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/cgo"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	wcpp "github.com/ggerganov/whisper.cpp/bindings/go"

	"github.com/wsched/wsched/estimator/ggml"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/internal/audio"
	"github.com/wsched/wsched/plugins/internal/streamgate"
	"github.com/wsched/wsched/plugins/whisper/describe"
)

// Name is the backend's name: its binary is wsched-backend-whisper.
const Name = "whisper"

// FFmpegNone in Options.FFmpeg turns the ffmpeg fallback off.
const FFmpegNone = audio.FFmpegNone

// Options configure a Backend; the zero value works.
type Options struct {
	Log     *slog.Logger // nil: discard
	Version string       // Info's version; "" means "dev"
	// FFmpeg decodes audio that is not PCM/float WAV: "" looks "ffmpeg" up on
	// PATH at each call, FFmpegNone disables it, anything else is its path.
	FFmpeg string
	// MaxStreams is how many Transcribe calls run at once on a loaded
	// model, each on its own whisper_state; 0: the descriptor's
	// (describe.MaxStreams). A Load's Extra["max_streams"] overrides it for
	// that model.
	MaxStreams int
}

// Backend is whisper.cpp as a plugins.Backend. It holds one model (one
// whisper_context: the weights, loaded once) and serves up to max_streams
// Transcribe calls at once, each on a whisper_state of its own allocated
// when the call starts and freed when it ends, so the process's memory
// follows the streams in flight (issue 26); further calls wait. Load and
// Unload wait for the calls in flight and keep new ones out. whisper.cpp's
// log callback and ggml's backend registry are process-wide, so a process
// runs one Backend.
type Backend struct {
	opts    Options
	log     *slog.Logger
	sink    *logSink
	sinkRef cgo.Handle // never deleted: C may log at any time
	devs    []ggmlDevice
	regs    []string         // ggml backend registries loaded (CPU, CUDA, …)
	gate    *streamgate.Gate // streams in flight, or Load/Unload alone
	tags    atomic.Uint64
	states  atomic.Int64 // whisper_states allocated now (not the default one)
	initMu  sync.Mutex   // states are allocated one at a time
	vadMu   sync.Mutex   // held by a call on the context's default state (VAD)

	mu     sync.Mutex
	model  *model // nil when none is loaded
	broken string // why whisper.cpp cannot be used any more; "" when fine
}

var _ plugins.Backend = (*Backend)(nil)

// New registers ggml's backends (ggml_backend_load_all, once per process) and
// returns a Backend with no model loaded.
func New(opts Options) *Backend {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = describe.MaxStreams
	}
	b := &Backend{opts: opts, log: log, sink: newLogSink(log), gate: streamgate.New(opts.MaxStreams)}
	b.sinkRef = cgo.NewHandle(b.sink)
	installLog(b.sinkRef)
	loadBackends()
	b.devs, b.regs = devices(), registries()
	return b
}

// Info reports the backend, whisper.cpp's version and system info, ggml's
// devices, the ffmpeg in use, the loaded model and where it went, and the
// CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER the process was started with.
func (b *Backend) Info(ctx context.Context) (plugins.Info, error) {
	kinds := deviceKinds(b.devs, b.regs)
	var names []string
	for _, d := range b.devs {
		name := d.name + " (" + d.description + ")"
		if d.gpu {
			name += fmt.Sprintf(", %d of %d MiB free at start", d.freeBytes>>20, d.totalBytes>>20)
		}
		names = append(names, name)
	}
	version := b.opts.Version
	if version == "" {
		version = "dev"
	}
	meta := map[string]string{
		"whisper_cpp":   whisperVersion(),
		"system_info":   systemInfo(),
		"devices":       strings.Join(names, "; "),
		"ggml_backends": strings.Join(b.regs, ","),
		"ffmpeg":        b.ffmpeg(),
	}
	for _, name := range []string{"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"} {
		if v, ok := os.LookupEnv(name); ok {
			meta["env."+name] = v // what the host's lease environment looks like from here
		}
	}
	b.mu.Lock()
	if m := b.model; m != nil {
		meta["model"], meta["device"] = m.path, m.device
		meta["flash_attn"], meta["threads"] = strconv.FormatBool(m.flashAttn), strconv.Itoa(m.threads)
		meta["max_streams"] = strconv.Itoa(m.maxStreams)
	}
	meta["streams_in_flight"] = strconv.Itoa(b.gate.InFlight())
	meta["states_allocated"] = strconv.FormatInt(b.states.Load(), 10)
	b.mu.Unlock()
	return plugins.Info{Name: Name, Version: version, ModelFormats: []string{"ggml"}, Devices: kinds, Metadata: meta, Descriptor: describe.Descriptor()}, nil
}

// deviceKinds are the device kinds the build can run on: cpu, and cuda when
// ggml has a GPU device or loaded a GPU backend (CUDA, Vulkan, …) even with
// no device visible — the host probes Info with CUDA_VISIBLE_DEVICES="", and
// a CUDA build must not read as CPU-only there.
func deviceKinds(devs []ggmlDevice, regs []string) []string {
	kinds := []string{"cpu"}
	for _, d := range devs {
		if d.gpu {
			return append(kinds, "cuda")
		}
	}
	for _, r := range regs {
		switch strings.ToUpper(r) {
		case "CPU", "BLAS", "RPC", "":
		default:
			return append(kinds, "cuda")
		}
	}
	return kinds
}

// ffmpeg returns the ffmpeg to use, or "".
func (b *Backend) ffmpeg() string { return audio.FFmpegPath(b.opts.FFmpeg) }

// Health fails once an allocation failure has left whisper.cpp unusable.
func (b *Backend) Health(ctx context.Context) error {
	if err := b.usable(); err != nil {
		return fmt.Errorf("whisper health: %w", err)
	}
	return nil
}

func (b *Backend) usable() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.broken != "" {
		return fmt.Errorf("%w: %s; restart the backend", plugins.ErrUnavailable, b.broken)
	}
	return nil
}

// Unload frees the model once the calls in flight have ended.
func (b *Backend) Unload(ctx context.Context) error {
	if err := b.gate.Acquire(ctx, true); err != nil {
		return fmt.Errorf("whisper unload: %w", err)
	}
	defer b.gate.Release(true)
	b.unloadLocked()
	return nil
}

// unloadLocked frees the model; the caller holds the gate exclusively. A broken backend's
// model stays allocated: a parked thread may still be inside it.
func (b *Backend) unloadLocked() {
	b.mu.Lock()
	m, broken := b.model, b.broken != ""
	b.model = nil
	b.mu.Unlock()
	if m != nil && !broken {
		m.free()
		b.log.Info("unloaded model", "model", m.path)
	}
}

// errTrapped marks a call that ended in the allocation-failure trap.
var errTrapped = errors.New("whisper.cpp failed to allocate memory")

// newTag names one blocking whisper.cpp call in the log (never 0).
func (b *Backend) newTag() uint64 { return b.tags.Add(1) }

// call runs fn, one blocking whisper.cpp call whose C wrapper tags its log
// lines with tag, on its own goroutine with those lines collected and the
// allocation-failure trap armed (see parkForever). After a trapped call the
// backend is broken and fn's goroutine never returns.
func (b *Backend) call(tag uint64, fn func()) ([]logLine, error) {
	installLog(b.sinkRef) // re-claim the process-wide callback
	c := b.sink.arm(tag)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
		return b.sink.disarm(tag), nil
	case line := <-c.trap:
		b.sink.disarm(tag)
		b.mu.Lock()
		b.broken = "whisper.cpp ran out of memory: " + line
		b.mu.Unlock()
		b.log.Error("whisper.cpp failed to allocate memory; backend disabled until restarted", "line", line)
		return nil, fmt.Errorf("%w: %w: %s", plugins.ErrOutOfMemory, errTrapped, line)
	}
}

// model is a loaded whisper_context and what it was loaded with.
type model struct {
	ctx *wcpp.Context
	// withState: the context has its default state (loaded with a VAD
	// model: whisper.cpp 1.9 runs VAD only in whisper_full, on that state);
	// calls that ask for VAD use it, one at a time.
	withState    bool
	maxStreams   int
	path         string
	device       string // "cpu" or "cuda:N"
	threads      int    // 0: whisper.cpp's default
	flashAttn    bool
	multilingual bool
	vadModel     cString              // C copy of the VAD model path; nil p when none
	report       plugins.MemoryReport // the weights and one stream, as Load returns it
	stream       plugins.MemoryReport // one state's buffers, measured at load
}

func (m *model) free() {
	m.ctx.Whisper_free()
	m.vadModel.free()
}

// checkModelFile reports a missing or unreadable file as ErrModelNotFound and
// one without the ggml magic as ErrBadModel.
func checkModelFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", plugins.ErrModelNotFound, err)
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || binary.LittleEndian.Uint32(magic[:]) != ggml.Magic {
		return fmt.Errorf("%w: %s is not a ggml model file (no ggml magic)", plugins.ErrBadModel, path)
	}
	return nil
}

// checkWhisperModel also reads the header, vocabulary and tensor table the
// way whisper_model_load will: whisper.cpp 1.9.5 accepts a file cut short
// in its vocabulary and crashes later, so such files are refused here.
func checkWhisperModel(path string) error {
	if err := checkModelFile(path); err != nil {
		return err
	}
	h, err := ggml.ReadFile(path)
	if err == nil {
		err = h.CheckWhisper()
	}
	if err != nil {
		return fmt.Errorf("%w: %w", plugins.ErrBadModel, err)
	}
	return nil
}
