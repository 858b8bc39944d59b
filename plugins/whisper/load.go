//go:build whisper

package whisper

import (
	"context"
	"fmt"

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
// default for Transcribe; VADModelPath the silero model Transcribe's VAD
// option uses.
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
	if err := checkWhisperModel(req.ModelPath); err != nil {
		return fail(err)
	}
	if req.VADModelPath != "" {
		if err := checkModelFile(req.VADModelPath); err != nil {
			return fail(fmt.Errorf("VAD model: %w", err))
		}
	}
	if err := b.acquire(ctx); err != nil {
		return fail(err)
	}
	defer b.release()
	b.unloadLocked()
	m, err := b.initModel(req, cp, dev)
	if err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil { // the host gave up waiting: do not keep it
		m.free()
		return fail(err)
	}
	b.mu.Lock()
	b.model = m
	b.mu.Unlock()
	b.log.Info("loaded model", "model", req.ModelPath, "device", dev, "flash_attn", cp.flashAttn,
		"total_bytes", m.report.TotalBytes, "model_bytes", m.report.ModelBytes, "kv_self_bytes", m.report.KVSelfBytes)
	return m.report, nil
}

// initModel runs whisper_init under the trap and builds the model.
func (b *Backend) initModel(req plugins.LoadRequest, cp contextParams, dev string) (*model, error) {
	var wctx *wcpp.Context
	lines, err := b.call(func() { wctx = initContext(req.ModelPath, cp) })
	if err != nil {
		return nil, err
	}
	if wctx == nil {
		return nil, fmt.Errorf("%w: whisper.cpp refused it: %s", plugins.ErrBadModel, lastError(lines))
	}
	m := &model{
		ctx: wctx, path: req.ModelPath, device: dev, threads: req.Threads, flashAttn: cp.flashAttn,
		multilingual: wctx.Whisper_is_multilingual() != 0, report: memoryReport(lines),
	}
	if req.VADModelPath != "" {
		m.vadModel = newCString(req.VADModelPath)
	}
	return m, nil
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
