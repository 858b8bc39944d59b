//go:build whisper

package main

/*
#cgo LDFLAGS: -lwhisper -lggml -lggml-base
#include <stdint.h>
#include <stdlib.h>
#include <whisper.h>
#include <ggml-backend.h>
#include "alloc.h"

// As plugins/whisper's callbacks.c: make deps' bundle route names the backend modules' directory.
static void probe_load_backends(void) {
#ifdef WSCHED_GGML_BACKEND_DIR
	ggml_backend_load_all_from_path(WSCHED_GGML_BACKEND_DIR);
#else
	ggml_backend_load_all();
#endif
}

void probe_install_log(uintptr_t handle);
void probe_restore_log(void);
*/
import "C"

import (
	"errors"
	"io"
	"runtime/cgo"
	"strings"
	"sync"
	"unsafe"

	whisper "github.com/ggerganov/whisper.cpp/bindings/go"
)

var errLoad = errors.New("whisper_init_from_file_with_params returned NULL")

// logSink receives whisper.cpp's log text through the C callback; the callback's user data is a
// cgo.Handle to it, so no package-level state is needed.
type logSink struct {
	mu    sync.Mutex
	part  strings.Builder
	lines []string
	echo  io.Writer
}

//export probeLogText
func probeLogText(level C.int, text *C.char, handle C.uintptr_t) {
	s, ok := cgo.Handle(handle).Value().(*logSink)
	if !ok {
		return
	}
	s.write(C.GoString(text))
}

func (s *logSink) write(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.WriteString(s.echo, text)
	s.part.WriteString(text)
	buf := s.part.String()
	for {
		i := strings.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		s.lines = append(s.lines, buf[:i])
		buf = buf[i+1:]
	}
	s.part.Reset()
	s.part.WriteString(buf)
}

func (s *logSink) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.lines
	s.lines = nil
	return out
}

// installLog routes whisper.cpp's and ggml's logging to s until the returned function is called
// (which restores whisper.cpp's default, printing to stderr).
func installLog(s *logSink) (restore func()) {
	h := cgo.NewHandle(s)
	C.probe_install_log(C.uintptr_t(h))
	return func() {
		C.probe_restore_log()
		h.Delete()
	}
}

func loadBackends() { C.probe_load_backends() }

func whisperVersion() string { return C.GoString(C.whisper_version()) }

// contextParams are the whisper_context_params the Go bindings do not expose (Whisper_init always
// uses whisper_context_default_params()).
type contextParams struct {
	UseGPU    bool `json:"use_gpu"`
	FlashAttn bool `json:"flash_attn"`
	GPUDevice int  `json:"gpu_device"`
}

func defaultContextParams() contextParams {
	p := C.whisper_context_default_params()
	return contextParams{UseGPU: bool(p.use_gpu), FlashAttn: bool(p.flash_attn), GPUDevice: int(p.gpu_device)}
}

// initContext loads a model with explicit context parameters and hands back the bindings' type, which
// is the same C struct.
func initContext(path string, cp contextParams) (*whisper.Context, error) {
	p := C.whisper_context_default_params()
	p.use_gpu = C.bool(cp.UseGPU)
	p.flash_attn = C.bool(cp.FlashAttn)
	p.gpu_device = C.int(cp.GPUDevice)
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	ctx := C.whisper_init_from_file_with_params(cpath, p)
	if ctx == nil {
		return nil, errLoad
	}
	return (*whisper.Context)(unsafe.Pointer(ctx)), nil
}

// fullParams are the decoding parameters that matter for memory, read back from the C struct.
type fullParams struct {
	Strategy       string  `json:"strategy"`
	Threads        int     `json:"n_threads"`
	BestOf         int     `json:"best_of"`
	BeamSize       int     `json:"beam_size"`
	Temperature    float32 `json:"temperature"`
	TemperatureInc float32 `json:"temperature_inc"`
	Language       string  `json:"language"`
}

func cParams(p *whisper.Params) *C.struct_whisper_full_params {
	return (*C.struct_whisper_full_params)(unsafe.Pointer(p))
}

func readFullParams(p *whisper.Params) fullParams {
	c := cParams(p)
	fp := fullParams{
		Strategy:       "greedy",
		Threads:        int(c.n_threads),
		BestOf:         int(c.greedy.best_of),
		BeamSize:       int(c.beam_search.beam_size),
		Temperature:    float32(c.temperature),
		TemperatureInc: float32(c.temperature_inc),
	}
	if c.strategy == C.WHISPER_SAMPLING_BEAM_SEARCH {
		fp.Strategy = "beam_search"
	}
	if c.language != nil {
		fp.Language = C.GoString(c.language)
	}
	return fp
}

// alloc is one posix_memalign of at least PROBE_MIN_ALLOC bytes, tagged with the probe phase.
type alloc struct {
	Phase string `json:"phase"`
	Bytes int64  `json:"bytes"`
}

const (
	phaseStart = iota
	phaseInit
	phaseFull
)

func phaseName(p int) string {
	switch p {
	case phaseStart:
		return "start"
	case phaseInit:
		return "init"
	case phaseFull:
		return "full"
	}
	return "unknown"
}

func setPhase(i int) { C.probe_set_phase(C.int(i)) }

func allocs() []alloc {
	n := int(C.probe_alloc_count())
	out := make([]alloc, 0, n)
	for i := 0; i < n; i++ {
		ph := int(C.probe_alloc_phase(C.int(i)))
		out = append(out, alloc{Phase: phaseName(ph), Bytes: int64(C.probe_alloc_size(C.int(i)))})
	}
	return out
}
