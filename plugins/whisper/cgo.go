//go:build whisper

package whisper

/*
#cgo LDFLAGS: -lwhisper -lggml -lggml-base
#include <stdint.h>
#include <stdlib.h>
#include <whisper.h>
#include <ggml-backend.h>

void wsched_load_backends(void);
void wsched_log_install(uintptr_t handle);
int *wsched_flag_new(void);
void wsched_flag_set(int *flag);
void wsched_set_callbacks(struct whisper_full_params *p, uintptr_t handle, int *flag);
struct whisper_full_params *wsched_params_new(enum whisper_sampling_strategy strategy);
struct whisper_context *wsched_init_context(const char *path, struct whisper_context_params cp, bool no_state, uintptr_t tag);
struct whisper_state *wsched_init_state(struct whisper_context *ctx, uintptr_t tag);
int wsched_full(struct whisper_context *ctx, struct whisper_state *st, const struct whisper_full_params *p, const float *samples, int n, uintptr_t tag);
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"strings"
	"time"
	"unsafe"

	wcpp "github.com/ggerganov/whisper.cpp/bindings/go"

	"github.com/wsched/wsched/plugins"
)

// Everything cgo in the package is here and in callbacks.c: what the Go
// bindings do not expose (context parameters, best_of, the abort callback,
// log capture, backend registration, device listing). The bindings' own
// callbacks are never installed: they live in package-level maps without a
// lock.

//export wschedLogText
func wschedLogText(level C.int, text *C.char, handle, tag C.uintptr_t) {
	if s, ok := cgo.Handle(handle).Value().(*logSink); ok {
		s.write(uint64(tag), int(level), C.GoString(text))
	}
}

//export wschedSegment
func wschedSegment(n C.int, handle C.uintptr_t) {
	if r, ok := cgo.Handle(handle).Value().(*run); ok {
		r.onSegments(int(n))
	}
}

//export wschedProgress
func wschedProgress(p C.int, handle C.uintptr_t) {
	if r, ok := cgo.Handle(handle).Value().(*run); ok {
		r.onProgress(int(p))
	}
}

// ggml log levels (enum ggml_log_level) the sink tells apart.
const (
	levelInfo  = int(C.GGML_LOG_LEVEL_INFO)
	levelWarn  = int(C.GGML_LOG_LEVEL_WARN)
	levelError = int(C.GGML_LOG_LEVEL_ERROR)
	levelCont  = int(C.GGML_LOG_LEVEL_CONT)
)

// loadBackends registers ggml's CPU and GPU backends, once per process.
func loadBackends() { C.wsched_load_backends() }

// installLog routes whisper.cpp's and ggml's log lines to the sink behind h.
func installLog(h cgo.Handle) { C.wsched_log_install(C.uintptr_t(h)) }

func whisperVersion() string { return C.GoString(C.whisper_version()) }

func systemInfo() string { return strings.TrimSpace(C.GoString(C.whisper_print_system_info())) }

// ggmlDevice is one ggml backend device.
type ggmlDevice struct {
	name, description string
	gpu               bool
	// freeBytes and totalBytes are a GPU's memory as the process saw it
	// at start (0 for the CPU).
	freeBytes, totalBytes int64
}

// devices lists the devices ggml registered, in whisper.cpp's order: its
// gpu_device counts the GPU ones only. Reading a GPU's memory creates the
// process's CUDA context there (cudaMemGetInfo), at start and before any
// model: the host's first reading of the process is then its bare context,
// which the daemon learns per GPU model and driver.
func devices() []ggmlDevice {
	n := int(C.ggml_backend_dev_count())
	out := make([]ggmlDevice, 0, n)
	for i := range n {
		d := C.ggml_backend_dev_get(C.size_t(i))
		t := C.ggml_backend_dev_type(d)
		out = append(out, ggmlDevice{
			name:        C.GoString(C.ggml_backend_dev_name(d)),
			description: C.GoString(C.ggml_backend_dev_description(d)),
			gpu:         t == C.GGML_BACKEND_DEVICE_TYPE_GPU || t == C.GGML_BACKEND_DEVICE_TYPE_IGPU,
		})
		if last := &out[len(out)-1]; last.gpu {
			var free, total C.size_t
			C.ggml_backend_dev_memory(d, &free, &total)
			last.freeBytes, last.totalBytes = int64(free), int64(total)
		}
	}
	return out
}

// registries lists the names of the ggml backends this process loaded
// ("CPU", "CUDA", …), whether or not they found a device: a CUDA build
// started with no GPU visible (CUDA_VISIBLE_DEVICES="", as the host's Info
// probe runs it) has the CUDA registry with no devices.
func registries() []string {
	n := int(C.ggml_backend_reg_count())
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, C.GoString(C.ggml_backend_reg_name(C.ggml_backend_reg_get(C.size_t(i)))))
	}
	return out
}

// contextParams are the whisper_context_params that matter here; the
// bindings' Whisper_init always uses the defaults (GPU and flash attention on).
type contextParams struct {
	useGPU    bool
	flashAttn bool
	gpuDevice int
}

// initContext loads a model, weights only when noState (each call then
// brings its own state, see newState); nil means whisper.cpp refused it
// (its log says why). The result is the bindings' type: the same C struct.
// tag names the call in the log (see logSink).
func initContext(path string, p contextParams, noState bool, tag uint64) *wcpp.Context {
	cp := C.whisper_context_default_params()
	cp.use_gpu = C.bool(p.useGPU)
	cp.flash_attn = C.bool(p.flashAttn)
	cp.gpu_device = C.int(p.gpuDevice)
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	return (*wcpp.Context)(unsafe.Pointer(C.wsched_init_context(cpath, cp, C.bool(noState), C.uintptr_t(tag))))
}

// state is one whisper_state on a context's weights, or the context's
// default state when st is nil.
type state struct {
	ctx *C.struct_whisper_context
	st  *C.struct_whisper_state
}

func cContext(ctx *wcpp.Context) *C.struct_whisper_context {
	return (*C.struct_whisper_context)(unsafe.Pointer(ctx))
}

// newState allocates a state (whisper_init_state: KV caches and compute
// buffers, logged under tag); ok is false when whisper.cpp could not.
func newState(ctx *wcpp.Context, tag uint64) (s state, ok bool) {
	c := cContext(ctx)
	st := C.wsched_init_state(c, C.uintptr_t(tag))
	return state{ctx: c, st: st}, st != nil
}

// defaultState is the context's own state (a context loaded with one).
func defaultState(ctx *wcpp.Context) state { return state{ctx: cContext(ctx)} }

// free releases an allocated state; the default state stays with its context.
func (s state) free() {
	if s.st != nil {
		C.whisper_free_state(s.st)
	}
}

func (s state) nSegments() int {
	if s.st == nil {
		return int(C.whisper_full_n_segments(s.ctx))
	}
	return int(C.whisper_full_n_segments_from_state(s.st))
}

func (s state) segmentText(i int) string {
	if s.st == nil {
		return C.GoString(C.whisper_full_get_segment_text(s.ctx, C.int(i)))
	}
	return C.GoString(C.whisper_full_get_segment_text_from_state(s.st, C.int(i)))
}

// segmentTimes are segment i's start and end in 10 ms units.
func (s state) segmentTimes(i int) (t0, t1 int64) {
	if s.st == nil {
		return int64(C.whisper_full_get_segment_t0(s.ctx, C.int(i))), int64(C.whisper_full_get_segment_t1(s.ctx, C.int(i)))
	}
	return int64(C.whisper_full_get_segment_t0_from_state(s.st, C.int(i))), int64(C.whisper_full_get_segment_t1_from_state(s.st, C.int(i)))
}

func (s state) langID() int {
	if s.st == nil {
		return int(C.whisper_full_lang_id(s.ctx))
	}
	return int(C.whisper_full_lang_id_from_state(s.st))
}

// cString is a C copy of a Go string; free it with free.
type cString struct{ p *C.char }

func newCString(s string) cString { return cString{p: C.CString(s)} }

func (s cString) free() {
	if s.p != nil {
		C.free(unsafe.Pointer(s.p))
	}
}

// fullParams is whisper_full_params in C memory: its user-data fields hold
// cgo.Handle values, which must never sit in a pointer-typed field of Go
// memory. The bindings' setters work on it through bindings.
type fullParams struct{ c *C.struct_whisper_full_params }

func newFullParams(beam bool) fullParams {
	strategy := C.enum_whisper_sampling_strategy(C.WHISPER_SAMPLING_GREEDY)
	if beam {
		strategy = C.WHISPER_SAMPLING_BEAM_SEARCH
	}
	return fullParams{c: C.wsched_params_new(strategy)}
}

func (p fullParams) free() { C.free(unsafe.Pointer(p.c)) }

// bindings returns the same struct as the bindings' type, for its setters.
func (p fullParams) bindings() *wcpp.Params { return (*wcpp.Params)(unsafe.Pointer(p.c)) }

func (p fullParams) setBestOf(n int)      { p.c.greedy.best_of = C.int(n) }
func (p fullParams) setPrompt(s cString)  { p.c.initial_prompt = s.p }
func (p fullParams) setVAD(model cString) { p.c.vad, p.c.vad_model_path = true, model.p }

// setVADParams sets the non-zero fields of v over whisper.cpp's defaults
// (whisper_vad_params: threshold 0.5, min speech 250 ms, min silence 100 ms,
// no max speech, 30 ms padding).
func (p fullParams) setVADParams(v plugins.VADParams) {
	vp := &p.c.vad_params
	if v.Threshold > 0 {
		vp.threshold = C.float(v.Threshold)
	}
	if v.MinSpeech > 0 {
		vp.min_speech_duration_ms = C.int(v.MinSpeech.Milliseconds())
	}
	if v.MinSilence > 0 {
		vp.min_silence_duration_ms = C.int(v.MinSilence.Milliseconds())
	}
	if v.MaxSpeech > 0 {
		vp.max_speech_duration_s = C.float(v.MaxSpeech.Seconds())
	}
	if v.SpeechPad > 0 {
		vp.speech_pad_ms = C.int(v.SpeechPad.Milliseconds())
	}
}

// vadOn reads back whether whisper_full will run VAD.
func (p fullParams) vadOn() bool { return bool(p.c.vad) }

// vadParams reads back the VAD parameters whisper_full will use.
func (p fullParams) vadParams() plugins.VADParams {
	vp := p.c.vad_params
	ms := func(n C.int) time.Duration { return time.Duration(n) * time.Millisecond }
	return plugins.VADParams{Threshold: float64(vp.threshold), MinSpeech: ms(vp.min_speech_duration_ms), MinSilence: ms(vp.min_silence_duration_ms),
		MaxSpeech: time.Duration(float64(vp.max_speech_duration_s) * float64(time.Second)), SpeechPad: ms(vp.speech_pad_ms)}
}
func (p fullParams) bestOf() int             { return int(p.c.greedy.best_of) }
func (p fullParams) beamSearch() bool        { return p.c.strategy == C.WHISPER_SAMPLING_BEAM_SEARCH }
func (p fullParams) beamSize() int           { return int(p.c.beam_search.beam_size) }
func (p fullParams) temperature() float32    { return float32(p.c.temperature) }
func (p fullParams) temperatureInc() float32 { return float32(p.c.temperature_inc) }
func (p fullParams) setCallbacks(h cgo.Handle, f abortFlag) {
	C.wsched_set_callbacks(p.c, C.uintptr_t(h), f.p)
}

// abortFlag is C memory whisper.cpp's abort and encoder-begin callbacks read.
type abortFlag struct{ p *C.int }

func newAbortFlag() abortFlag { return abortFlag{p: C.wsched_flag_new()} }
func (f abortFlag) set()      { C.wsched_flag_set(f.p) }
func (f abortFlag) free()     { C.free(unsafe.Pointer(f.p)) }

// full runs whisper_full_with_state on s (whisper_full on the default
// state) and returns its status (0 = success); its log lines carry tag.
func full(s state, p fullParams, samples []float32, tag uint64) int {
	return int(C.wsched_full(s.ctx, s.st, p.c, (*C.float)(unsafe.Pointer(&samples[0])), C.int(len(samples)), C.uintptr_t(tag)))
}

// fullError says what a non-zero whisper_full status means
// (whisper_full_with_state in whisper.cpp 1.9.5).
func fullError(status int) string {
	switch status {
	case -1:
		return "voice activity detection failed"
	case -2:
		return "log mel spectrogram failed"
	case -3:
		return "language detection failed"
	case -4:
		return "too many decoders"
	case -5:
		return "audio_ctx too large"
	case -6:
		return "encoder failed"
	case -7:
		return "KV cache allocation failed"
	case -8, -9:
		return "decoder failed"
	}
	return fmt.Sprintf("status %d", status)
}
