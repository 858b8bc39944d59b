//go:build whisper

package whisper

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	wcpp "github.com/ggerganov/whisper.cpp/bindings/go"

	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/plugins"
)

// Load loads a ggml model with whisper_init_from_file_with_params and
// returns the buffer sizes whisper.cpp logged while doing it (see
// memoryReport). A loaded model is freed first. Device "cpu" sets
// use_gpu = false; "cuda:N" (N counts the GPUs the process sees, normally 0
// under a lease) and "" or "auto" (the first GPU) set it and gpu_device.
// Without any ggml GPU backend every device means the CPU, with a warning;
// Info's "device" says where the model went. FlashAttention is whisper.cpp's flash_attn; Threads the
// default for Transcribe (per stream); VADModelPath the silero model Transcribe's VAD
// option uses; Extra["max_streams"] how many Transcribe calls run at once.
//
// The context holds the weights only (no state): each Transcribe call
// allocates its own whisper_state. Load allocates one state too, to
// measure it and to fail here when one does not fit, and frees it: the
// report is the weights plus one stream, what one job of the model takes.
// A model loaded with a VAD model keeps its default state (see model).
func (b *Backend) Load(ctx context.Context, req plugins.LoadRequest) (plugins.MemoryReport, error) {
	fail := func(err error) (plugins.MemoryReport, error) {
		return plugins.MemoryReport{}, fmt.Errorf("whisper load %s: %w", req.ModelPath, err)
	}
	if err := b.usable(); err != nil {
		return fail(err)
	}
	cp, dev, err := b.placement(req.Device)
	if err != nil {
		return fail(err)
	}
	cp.flashAttn = req.FlashAttention
	if req.Threads < 0 {
		return fail(fmt.Errorf("%w: threads %d", plugins.ErrBadRequest, req.Threads))
	}
	streams, err := maxStreams(req.Extra, b.opts.MaxStreams)
	if err != nil {
		return fail(err)
	}
	if err := checkWhisperModel(req.ModelPath); err != nil {
		return fail(err)
	}
	if req.VADModelPath != "" {
		if err := checkModelFile(req.VADModelPath); err != nil {
			return fail(fmt.Errorf("VAD model: %w", err))
		}
	}
	if err := b.gate.Acquire(ctx, true); err != nil {
		return fail(err)
	}
	defer b.gate.Release(true)
	b.unloadLocked()
	m, err := b.initModel(req, cp, dev)
	if err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil { // the host gave up waiting: do not keep it
		m.free()
		return fail(err)
	}
	m.maxStreams = streams
	b.gate.SetLimit(streams)
	b.mu.Lock()
	b.model = m
	b.mu.Unlock()
	b.log.Info("loaded model", "model", req.ModelPath, "device", dev, "flash_attn", cp.flashAttn, "max_streams", streams,
		"total_bytes", m.report.TotalBytes, "model_bytes", m.report.ModelBytes, "stream_bytes", m.stream.TotalBytes)
	return m.report, nil
}

// initModel runs whisper_init under the trap, measures one state and
// builds the model.
func (b *Backend) initModel(req plugins.LoadRequest, cp contextParams, dev string) (*model, error) {
	var wctx *wcpp.Context
	withState := req.VADModelPath != ""
	tag := b.newTag()
	lines, err := b.call(tag, func() { wctx = initContext(req.ModelPath, cp, !withState, tag) })
	if err != nil {
		return nil, err
	}
	if wctx == nil {
		return nil, fmt.Errorf("%w: whisper.cpp refused it: %s", plugins.ErrBadModel, lastError(lines))
	}
	m := &model{
		ctx: wctx, withState: withState, path: req.ModelPath, device: dev, threads: req.Threads, flashAttn: cp.flashAttn,
		multilingual: wctx.Whisper_is_multilingual() != 0,
	}
	if withState {
		// The default state's lines came with the weights'.
		m.report, m.stream = memoryReport(lines), streamReport(lines)
	} else {
		st, stLines, err := b.newState(m)
		if err != nil {
			if !errors.Is(err, errTrapped) {
				wctx.Whisper_free()
			}
			return nil, err
		}
		b.freeState(st)
		m.report, m.stream = memoryReport(append(lines, stLines...)), streamReport(stLines)
	}
	if req.VADModelPath != "" {
		m.vadModel = newCString(req.VADModelPath)
	}
	return m, nil
}

// maxStreams reads extra's max_streams (the instance's, as the host sends
// it), or def.
func maxStreams(extra map[string]string, def int) (int, error) {
	v, ok := extra[ExtraMaxStreams]
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: %s=%q: want a positive count", plugins.ErrBadRequest, ExtraMaxStreams, v)
	}
	return n, nil
}

// newState allocates a whisper_state for one call, one at a time, under
// the trap; its lines are the state's buffer sizes. The caller frees it
// with freeState.
func (b *Backend) newState(m *model) (state, []logLine, error) {
	b.initMu.Lock()
	defer b.initMu.Unlock()
	var (
		st state
		ok bool
	)
	tag := b.newTag()
	lines, err := b.call(tag, func() { st, ok = newState(m.ctx, tag) })
	if err != nil {
		return state{}, nil, err
	}
	if !ok {
		return state{}, nil, fmt.Errorf("%w: whisper_init_state: %s", plugins.ErrOutOfMemory, lastError(lines))
	}
	b.states.Add(1)
	return st, lines, nil
}

// freeState frees a state newState allocated.
func (b *Backend) freeState(st state) {
	st.free()
	b.states.Add(-1)
}

// placement turns the request's device into context parameters and the
// device name the backend reports.
func (b *Backend) placement(dev string) (contextParams, string, error) {
	spec, err := device.Parse(dev)
	if err != nil {
		return contextParams{}, "", fmt.Errorf("%w: %w", plugins.ErrBadRequest, err)
	}
	gpus := 0
	for _, d := range b.devs {
		if d.gpu {
			gpus++
		}
	}
	switch spec.Kind {
	case device.CPU:
		return contextParams{}, "cpu", nil
	case device.Auto:
		if gpus == 0 {
			b.log.Info("no GPU backend registered with ggml: loading on the CPU", "device", dev)
			return contextParams{}, "cpu", nil
		}
		return contextParams{useGPU: true}, "cuda:0", nil
	case device.Index:
		if gpus == 0 {
			// A host without a ggml GPU backend (no libggml0-backend-cuda, or
			// a simulated GPU in tests): whisper.cpp would fall back to the CPU
			// itself; say so loudly and report the device truthfully.
			b.log.Warn("GPU requested but ggml has no GPU backend (install libggml0-backend-cuda): loading on the CPU", "device", dev)
			return contextParams{}, "cpu", nil
		}
		if spec.Index >= gpus {
			return contextParams{}, "", fmt.Errorf("%w: device cuda:%d, but ggml sees %d GPU(s)", plugins.ErrBadRequest, spec.Index, gpus)
		}
		return contextParams{useGPU: true, gpuDevice: spec.Index}, fmt.Sprintf("cuda:%d", spec.Index), nil
	}
	return contextParams{}, "", fmt.Errorf("%w: device %q: name the GPU as the backend process sees it (cuda:0)", plugins.ErrBadRequest, dev)
}
