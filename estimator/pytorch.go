package estimator

import (
	"fmt"
	"strings"
)

// PyTorch (openai-whisper) profile.
//
// Sources:
//   - openai-whisper whisper/__init__.py load_model: torch.load(...,
//     map_location=device) puts the fp16 checkpoint on the GPU (2 B/param),
//     Whisper(dims).to(device) holds fp32 parameters (4 B/param); the
//     checkpoint is dropped after load_state_dict but PyTorch's caching
//     allocator keeps its blocks reserved, so NVML sees ≈ 6 B/param.
//   - whisper/model.py: Linear and Conv1d cast fp32 weights to the input's
//     dtype per call (fp16 by default, transcribe(fp16=True)); the kv_cache
//     hooks keep keys and values of self- and cross-attention per layer for
//     every decoded sequence (beam size or best_of, times batch), and the
//     audio features are repeated per sequence (decoding.py n_group).
//   - openai-whisper README "Available models": ~1, ~1, ~2, ~5, ~10, ~6 GB
//     required VRAM for tiny, base, small, medium, large, turbo.
//   - faster-whisper README benchmark: openai/whisper large-v2, fp16, beam 5
//     peaks at 11,325 MB; this formula gives 11.3 GB for it.

// readmeVRAM is openai-whisper's README table, in GB, by model family.
var readmeVRAM = map[string]float64{"tiny": 1, "base": 1, "small": 2, "medium": 5, "large": 10, "turbo": 6}

func readmeFamily(name string) string {
	n := strings.TrimSuffix(name, ".en")
	switch {
	case strings.Contains(n, "turbo"):
		return "turbo"
	case strings.HasPrefix(n, "large"):
		return "large"
	}
	return n
}

func (e *Estimator) pytorch(req Request) (formula, error) {
	m, err := resolveModel(req)
	if err != nil {
		return formula{}, err
	}
	bytesAct := int64(2)
	prec := "fp16"
	switch strings.ToLower(req.Precision) {
	case "", "fp16", "f16", "float16":
	case "fp32", "f32", "float32":
		bytesAct, prec = 4, "fp32"
	default:
		return formula{}, fmt.Errorf("estimate: pytorch precision %q (want fp16 or fp32): %w", req.Precision, ErrUnknownPrecision)
	}
	p := m.params()
	hp := m.hp
	seqs := int64(req.decoders() * req.batch())
	tl, ts, as := int64(hp.NTextLayer), int64(hp.NTextState), int64(hp.NAudioState)
	actx, tctx := int64(hp.NAudioCtx), int64(hp.NTextCtx)
	crossKV := tl * 2 * actx * ts * bytesAct * seqs
	selfKV := tl * 2 * tctx * ts * bytesAct * seqs
	encoder := 8 * actx * as * bytesAct * int64(req.batch()) // SDPA attention, MLP hidden
	ctxBytes, _, ctxWhy := e.contextFor(req.GPUModel)
	b := Breakdown{
		Weights:     4 * p,
		Transient:   2 * p,
		KVSelf:      selfKV,
		KVCross:     crossKV,
		Activations: encoder,
		Context:     ctxBytes,
	}
	f := formula{model: m.name, precision: prec, breakdown: b, margin: 0.20}
	f.explain = []string{
		fmt.Sprintf("%s: %.0fM parameters × 4 B fp32 weights + 2 B fp16 checkpoint copy kept by the caching allocator", m.name, float64(p)/1e6),
		fmt.Sprintf("kv caches for %d sequences (beam/best-of %d × batch %d) in %s", seqs, req.decoders(), req.batch(), prec),
		ctxWhy,
	}
	if gb, ok := readmeVRAM[readmeFamily(m.name)]; ok {
		f.explain = append(f.explain, fmt.Sprintf("openai-whisper README lists ~%.0f GB for %s", gb, readmeFamily(m.name)))
	}
	if req.SegmentSeconds > 0 {
		f.explain = append(f.explain, "segment length does not change openai-whisper's memory: it decodes 30 s windows")
	}
	f.suggestions = pytorchSuggestions(req, b)
	f.key = Key{Backend: PyTorch, Model: modelID(req, m.name), Precision: prec, Beam: req.decoders(), Batch: req.batch()}
	return f, nil
}

// faster-whisper (CTranslate2) profile.
//
// Sources:
//   - CTranslate2 compute types: float32 4 B/param, float16/bfloat16 2,
//     int8 / int8_float16 / int8_float32 / int8_bfloat16 1 (linear layers and
//     embeddings quantized; the small rest kept in float).
//   - faster-whisper README benchmark (13 min audio, beam 5): large-v2 fp16
//     4,755 MB, int8 3,091 MB (Tesla V100S); large-v3 fp16 4,521 MB, int8
//     2,953 MB, large-v3-turbo fp16 2,537 MB, int8 1,545 MB (RTX 2080 Ti,
//     faster-whisper issue #1030). The activation terms are fitted to these:
//     encoder ≈ 222 B × n_audio_ctx × n_audio_state per batch item, decoder ≈
//     2 B × n_audio_ctx × n_text_state per layer per hypothesis; with the
//     400 MiB context they reproduce the large-v3 figures within 1% and the
//     others within 12% (over) to 4% (under).

var ct2BytesPerParam = map[string]int64{
	"float32": 4, "float16": 2, "bfloat16": 2,
	"int8": 1, "int8_float16": 1, "int8_float32": 1, "int8_bfloat16": 1,
}

func (e *Estimator) fasterWhisper(req Request) (formula, error) {
	m, err := resolveModel(req)
	if err != nil {
		return formula{}, err
	}
	prec := strings.ToLower(req.Precision)
	switch prec {
	case "":
		prec = "float16"
	case "fp16", "f16":
		prec = "float16"
	case "fp32", "f32":
		prec = "float32"
	}
	bpp, ok := ct2BytesPerParam[prec]
	if !ok {
		return formula{}, fmt.Errorf("estimate: faster-whisper compute type %q (want float16, int8_float16, int8, float32, …): %w", req.Precision, ErrUnknownPrecision)
	}
	hp := m.hp
	hyps := int64(req.decoders() * req.batch())
	actx, as, ts, tl := int64(hp.NAudioCtx), int64(hp.NAudioState), int64(hp.NTextState), int64(hp.NTextLayer)
	ctxBytes, _, ctxWhy := e.contextFor(req.GPUModel)
	b := Breakdown{
		Weights:     bpp * m.params(),
		KVCross:     tl * 2 * actx * ts * hyps,
		Activations: 222 * actx * as * int64(req.batch()),
		Context:     ctxBytes,
	}
	f := formula{model: m.name, precision: prec, breakdown: b, margin: 0.20}
	f.explain = []string{
		fmt.Sprintf("%s: %.0fM parameters × %d B (%s)", m.name, float64(m.params())/1e6, bpp, prec),
		fmt.Sprintf("decoder state for %d hypotheses (beam %d × batch %d), encoder activations for batch %d: fitted to faster-whisper's published benchmarks",
			hyps, req.decoders(), req.batch(), req.batch()),
		ctxWhy,
	}
	f.suggestions = fasterWhisperSuggestions(req, prec, b)
	f.key = Key{Backend: FasterWhisper, Model: modelID(req, m.name), Precision: prec, Beam: req.decoders(), Batch: req.batch()}
	return f, nil
}
