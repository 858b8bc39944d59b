package estimator

import (
	"fmt"
	"strings"

	"github.com/wsched/wsched/estimator/ggml"
	"github.com/wsched/wsched/internal/units"
)

// whisper.cpp profile.
//
// Sources (whisper.cpp 1.9.5, src/whisper.cpp; ggml 0.27):
//   - whisper_model_load: the tensor list (ggml.ExpectedTensors) and one
//     weight buffer per device, each tensor padded to the buffer alignment;
//     CUDA pads the last row of quantized matrices to MATRIX_ROW_PADDING (512
//     elements, ggml-cuda.cu get_alloc_size).
//   - whisper_init_state: kv_self = 2 f16 tensors of n_text_state ×
//     n_text_layer × GGML_PAD(n_text_ctx, 256); kv_cross the same over
//     GGML_PAD(n_audio_ctx, 256); kv_pad 2 × n_audio_state ×
//     GGML_PAD(n_audio_ctx, 256). whisper_full_with_state re-creates kv_self
//     with factor n_decoders+2 when more than one decoder runs (beam search,
//     or best_of when temperature fallback samples).
//   - the four compute buffers (conv, encode, cross, decode) are ggml-alloc
//     reservations of whisper_build_graph_*; the decode one is reserved for
//     the worst case of n_text_ctx tokens, so it is dominated by the logits
//     (4·n_vocab·n_text_ctx bytes). Their logged size also counts the
//     scheduler's host-side graph metadata (whisperGraphMeta). The closed
//     forms below follow the graphs' largest live tensors and reproduce the
//     sizes whisper.cpp 1.9.5 logs on CPU for every for-tests model with and
//     without flash attention (testdata/whispercpp-1.9.5/cpu-probe.json).
//   - not logged by whisper.cpp: the CUDA memory pool ggml-cuda uses for
//     f16 copies of activations and results in cuBLAS matrix products (and
//     for dequantized weights of quantized models), and the CUDA context.

// whisperGraphMeta is whisper_sched's meta buffer: ggml_tensor_overhead()
// (368 bytes) × WHISPER_MAX_NODES (4096) + ggml_graph_overhead() (82,596
// bytes for the default graph size of 2048 on 64-bit ggml 0.27). Host memory.
const whisperGraphMeta = 368*4096 + 82596

const (
	cudaAlignment     = 128 // ggml_backend_cuda_buffer_type_get_alignment
	cpuAlignment      = 32  // TENSOR_ALIGNMENT of the CPU buffer type
	matrixRowPadding  = 512 // MATRIX_ROW_PADDING in ggml-cuda
	cudaPoolLookAhead = 1.05
)

// WhisperCppBuffers are the buffers whisper.cpp allocates at init, in bytes,
// the way its log lines name them ("CUDA0 total size", "kv self size",
// "compute buffer (encode)", …). Compute buffers are as logged: they include
// host-side graph metadata and, on CUDA, the host copies of graph inputs.
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
	// HostCompute is the part of the four compute figures that stays in host
	// memory (graph metadata, CPU-side inputs).
	HostCompute int64 `json:"host_compute"`
}

func pad(x, n int64) int64 { return (x + n - 1) / n * n }

// WhisperCppLogged computes the init-time buffers of whisper.cpp 1.9.5 for
// a model: hp and its tensors (nil: the tensors whisper.cpp creates for hp),
// on device "cpu" or "cuda", with or without flash attention. kv_self is the
// initial (one decoder) size.
func WhisperCppLogged(hp ggml.HParams, tensors []ggml.Tensor, device string, flashAttn bool) (WhisperCppBuffers, error) {
	if err := hp.Validate(); err != nil {
		return WhisperCppBuffers{}, fmt.Errorf("whisper.cpp buffers: %w", err)
	}
	if tensors == nil {
		var err error
		if tensors, err = ggml.ExpectedTensors(hp); err != nil {
			return WhisperCppBuffers{}, fmt.Errorf("whisper.cpp buffers: %w", err)
		}
	}
	cuda := device != "cpu"
	b := WhisperCppBuffers{Device: device, FlashAttention: flashAttn}
	if cuda {
		b.Device = "cuda"
	}
	b.Model = weightBuffer(tensors, cuda)
	ts, tl, tctx := int64(hp.NTextState), int64(hp.NTextLayer), int64(hp.NTextCtx)
	as, actx := int64(hp.NAudioState), int64(hp.NAudioCtx)
	b.KVSelf = 2 * 2 * ts * tl * pad(tctx, 256)
	b.KVCross = 2 * 2 * ts * tl * pad(actx, 256)
	b.KVPad = 2 * 2 * as * pad(actx, 256)

	mels, vocab := int64(hp.NMels), int64(hp.NVocab)
	ahead, thead := int64(hp.NAudioHead), int64(hp.NTextHead)
	// conv: mel input (f32, 2·n_ctx × n_mels), conv1's im2col (f16,
	// 3·n_mels × 2·n_ctx), conv1's f32 result and its bias-added copy.
	mel := 4 * 2 * actx * mels
	b.ComputeConv = whisperGraphMeta + mel + 2*3*mels*2*actx + 2*4*2*actx*as
	// encode: without flash attention the f32 KQ matrix (n_ctx² × n_head)
	// beside four f32 [n_state, n_ctx] activations; the MLP's 4·n_state
	// hidden layer with its neighbours otherwise (7 such activations).
	mlp := 4 * 7 * actx * as
	b.ComputeEncode = whisperGraphMeta + mlp
	if !flashAttn {
		b.ComputeEncode = whisperGraphMeta + max(mlp, 4*actx*actx*ahead+4*4*actx*as)
	}
	// cross: one f32 [n_state, n_ctx] projection at a time.
	b.ComputeCross = whisperGraphMeta + 4*actx*as
	// decode, worst case n_text_ctx tokens: f32 logits plus two activations.
	b.ComputeDecode = whisperGraphMeta + 4*vocab*tctx + 2*4*tctx*ts
	if !flashAttn {
		b.ComputeDecode = max(b.ComputeDecode, whisperGraphMeta+4*actx*tctx*thead+4*4*tctx*ts)
	}
	b.HostCompute = 4 * whisperGraphMeta
	if cuda {
		// Graph inputs live in the CPU backend's buffer and are copied to
		// the GPU: the mel for conv; tokens, positions and KQ mask for decode.
		inputs := 4*pad(tctx, 256)*tctx + 2*4*tctx
		b.ComputeConv += mel
		b.ComputeDecode += inputs
		b.HostCompute += mel + inputs
	}
	return b, nil
}

// weightBuffer is ggml_backend_alloc_ctx_tensors_from_buft's size: each
// tensor's allocation size padded to the buffer alignment.
func weightBuffer(tensors []ggml.Tensor, cuda bool) int64 {
	var total int64
	for _, t := range tensors {
		n := t.Bytes
		align := int64(cpuAlignment)
		if cuda {
			align = cudaAlignment
			if t.Type.Quantized() && len(t.Dims) > 0 && t.Dims[0]%matrixRowPadding != 0 {
				extra, _ := ggml.TensorBytes(t.Type, []int64{matrixRowPadding - t.Dims[0]%matrixRowPadding})
				n += extra
			}
		}
		total += pad(n, align)
	}
	return total
}

// whisperCppPrecision turns Request.Precision into a ggml weight type.
func whisperCppPrecision(p string) (ggml.Type, error) {
	switch strings.ToLower(p) {
	case "", "f16", "fp16", "float16":
		return ggml.TypeF16, nil
	case "f32", "fp32", "float32":
		return ggml.TypeF32, nil
	case "int8", "q8":
		return ggml.TypeQ8_0, nil
	case "int4", "q4":
		return ggml.TypeQ4_0, nil
	case "q5":
		return ggml.TypeQ5_0, nil
	}
	t, ok := ggml.ParseType(p)
	if !ok {
		return 0, fmt.Errorf("estimate: whisper.cpp precision %q (want a ggml type such as f16, q5_0, q8_0): %w", p, ErrUnknownPrecision)
	}
	if _, ok := ggml.FTypeFor(t); !ok {
		return 0, fmt.Errorf("estimate: %s is not a model file type: %w", t, ErrUnknownPrecision)
	}
	return t, nil
}

func (e *Estimator) whisperCpp(req Request) (formula, error) {
	f, err := e.whisperCppFormula(req)
	if err != nil {
		return f, err
	}
	f.suggestions = e.whisperCppSuggestions(req, f)
	return f, nil
}

// whisperCppFormula is the profile without suggestions (which call it).
func (e *Estimator) whisperCppFormula(req Request) (formula, error) {
	m, err := resolveModel(req)
	if err != nil {
		return formula{}, err
	}
	f := formula{margin: e.cfg.Margin}
	hp := m.hp
	var tensors []ggml.Tensor
	if m.header != nil {
		if !m.header.Empty {
			tensors = m.header.Tensors
		}
		f.explain = append(f.explain, fmt.Sprintf("model file: %s, %s weights, %d tensors (%s)",
			hp.Family(), m.header.WeightType(), len(m.header.Tensors), emptyNote(m.header)))
		if req.Precision != "" && !strings.EqualFold(req.Precision, m.header.WeightType().String()) {
			f.explain = append(f.explain, fmt.Sprintf("precision %q ignored: the file holds %s weights", req.Precision, m.header.WeightType()))
		}
	} else {
		wt, err := whisperCppPrecision(req.Precision)
		if err != nil {
			return formula{}, err
		}
		hp.FType, _ = ggml.FTypeFor(wt)
		f.explain = append(f.explain, fmt.Sprintf("model %s from the known-model table (no file): %s weights", m.name, wt))
	}
	wt, _ := hp.FType.WeightType()
	fa := req.FlashAttention == nil || *req.FlashAttention
	logged, err := WhisperCppLogged(hp, tensors, e.cfg.Device, fa)
	if err != nil {
		return formula{}, err
	}
	f.model, f.precision, f.whisper = m.name, wt.String(), &logged
	ctxBytes, row, ctxWhy := e.contextFor(req.GPUModel)
	f.breakdown = whisperCppBreakdown(hp, logged, wt, req, ctxBytes, row)
	f.explain = append(f.explain, whisperCppExplain(hp, logged, req)...)
	if logged.Device != "cpu" {
		f.explain = append(f.explain, ctxWhy, runtimeExplain(row, f.breakdown))
	}
	f.key = Key{Backend: WhisperCpp, Model: modelID(req, m.name), Precision: f.precision,
		Beam: req.decoders(), Batch: max(1, req.Processors)}
	return f, nil
}

func emptyNote(h *ggml.Model) string {
	if h.Empty {
		return "no tensors: sized as whisper.cpp allocates a test model"
	}
	return "sizes read from the tensor headers"
}

func modelID(req Request, name string) string {
	if req.ModelID != "" {
		return req.ModelID
	}
	return name
}

// kvFactor is whisper_full_with_state's over-allocation of kv_self.
func kvFactor(decoders int) int64 {
	if decoders > 1 {
		return int64(decoders) + 2
	}
	return 1
}

func whisperCppBreakdown(hp ggml.HParams, l WhisperCppBuffers, wt ggml.Type, req Request, ctxBytes int64, row OverheadRow) Breakdown {
	states := int64(max(1, req.Processors))
	b := Breakdown{
		Weights: l.Model,
		KVSelf:  states * l.KVSelf * kvFactor(req.decoders()),
		KVCross: states * l.KVCross,
		KVPad:   states * l.KVPad,
	}
	conv, enc, cross, dec := l.ComputeConv, l.ComputeEncode, l.ComputeCross, l.ComputeDecode
	if l.Device != "cpu" {
		// Only the GPU side: drop graph metadata and the host input copies.
		tctx := int64(hp.NTextCtx)
		conv -= whisperGraphMeta + 4*2*int64(hp.NAudioCtx)*int64(hp.NMels)
		enc -= whisperGraphMeta
		cross -= whisperGraphMeta
		dec -= whisperGraphMeta + 4*pad(tctx, 256)*tctx + 2*4*tctx
		b.CUDAPool = states * cudaPool(hp, wt)
		b.Context = ctxBytes
		b.CUDARuntime = ggmlRuntime(row, b.Weights)
	}
	b.ComputeConv, b.ComputeEncode = states*conv, states*enc
	b.ComputeCross, b.ComputeDecode = states*cross, states*dec
	b.Compute = b.ComputeConv + b.ComputeEncode + b.ComputeCross + b.ComputeDecode
	return b
}

// cudaPool estimates ggml-cuda's memory pool at its peak: the f16 result
// and f16 input of the largest cuBLAS product (the logits, n_vocab ×
// n_text_ctx) and, for quantized or f32 weights, the f16 copy of the token
// embedding it multiplies; the legacy pool rounds requests up by 5%.
func cudaPool(hp ggml.HParams, wt ggml.Type) int64 {
	vocab, tctx, ts := int64(hp.NVocab), int64(hp.NTextCtx), int64(hp.NTextState)
	n := 2*vocab*tctx + 2*ts*tctx
	if wt != ggml.TypeF16 {
		n += 2 * vocab * ts
	}
	return ceilMul(n, cudaPoolLookAhead)
}

func whisperCppExplain(hp ggml.HParams, l WhisperCppBuffers, req Request) []string {
	mb := func(b int64) string { return fmt.Sprintf("%.2f MB", float64(b)/1e6) }
	out := []string{
		fmt.Sprintf("whisper.cpp 1.9.5 would log: model %s, kv self %s, kv cross %s, kv pad %s, compute conv %s, encode %s, cross %s, decode %s (%s, flash attention %v)",
			mb(l.Model), mb(l.KVSelf), mb(l.KVCross), mb(l.KVPad), mb(l.ComputeConv), mb(l.ComputeEncode),
			mb(l.ComputeCross), mb(l.ComputeDecode), l.Device, l.FlashAttention),
		fmt.Sprintf("decode buffer: the logits of a worst-case %d-token batch, 4 × n_vocab %d × %d = %s",
			hp.NTextCtx, hp.NVocab, hp.NTextCtx, mb(4*int64(hp.NVocab)*int64(hp.NTextCtx))),
	}
	if d := req.decoders(); d > 1 {
		out = append(out, fmt.Sprintf("%d decoders (beam %d, best-of %d): kv_self is re-allocated ×%d = %s",
			d, req.Beam, req.BestOf, kvFactor(d), units.FormatBytes(l.KVSelf*kvFactor(d))))
	} else {
		out = append(out, "greedy decoding: kv_self ×1; note whisper.cpp's default best_of 5 with temperature fallback grows it ×7 when a segment falls back — pass best_of to reserve for that")
	}
	if req.SegmentSeconds > 0 {
		out = append(out, fmt.Sprintf("segment length %.0f s does not change whisper.cpp's memory: it always encodes 30 s windows", req.SegmentSeconds))
	}
	if req.Batch > 1 {
		out = append(out, "batch is not a whisper.cpp setting; use processors for parallel states")
	}
	if l.Device != "cpu" {
		out = append(out, fmt.Sprintf("compute buffers counted without their host-side part (%s of graph metadata and inputs)", units.FormatBytes(l.HostCompute)),
			"cuda_pool is an estimate (whisper.cpp does not log it): f16 copies in cuBLAS products, mostly the logits")
	}
	return out
}

func runtimeExplain(row OverheadRow, b Breakdown) string {
	return fmt.Sprintf("cuda_runtime %s (overhead row %q): cuBLAS workspace %s + ggml-cuda runtime %s + %.0f%% of the weights (kernel images, CUDA graphs, pool granularity; fitted on the H100 table)",
		units.FormatBytes(b.CUDARuntime), row.Generation, units.FormatBytes(row.CuBLASWorkspaceBytes),
		units.FormatBytes(ggmlRuntimeFixed), ggmlRuntimePerWeightByte*100)
}
