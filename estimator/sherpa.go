package estimator

import (
	"fmt"

	"github.com/wsched/wsched/internal/units"
)

// sherpa-onnx profile: a sherpa-onnx offline recognizer (ONNX Runtime) on
// the ONNX files of a model directory (ONNX in Request). Terms:
//
//   - weights: the files' initializer bytes (read by walking the protobuf,
//     estimator/onnx) × the provider factor. The CUDA provider copies every
//     initializer to the device once (factor 1). On the CPU the resident set
//     grows by 1.1–2.3× the initializer bytes while sherpa-onnx creates the
//     session (it reads the file into a buffer, ONNX Runtime parses it into
//     a ModelProto and copies the tensors; freed heap stays resident):
//     factor 2.3, measured on generated 112 MB and 224 MB models.
//   - compute: ONNX Runtime's BFC arena for activations. It grows by
//     doubling, so it may hold up to twice the peak activations; taken as
//     sherpaArenaShare of the weights (activations of a 30 s window are a
//     few percent of the weights for SenseVoice/Paraformer/Whisper encoders)
//     doubled, plus sherpaArenaMin. sherpa-onnx's C API sets no
//     gpu_mem_limit (it exposes no provider options), so the lease cannot
//     cap the arena: this term must cover it.
//   - cuda_runtime (CUDA only): cuBLAS workspace of the GPU's overhead row
//     plus cuDNN's handle and ONNX Runtime's CUDA kernels (sherpaCUDARuntime;
//     not measured here: the bundled ONNX Runtime is CPU-only).
//   - overhead: ONNX Runtime's own code and session state (sherpaRuntime;
//     12 MiB measured on the CPU for a 143 KB model, rounded up).
//   - context (CUDA only): the CUDA context of the GPU's overhead row, as
//     for the other profiles (overhead.go).
const (
	sherpaFactorCUDA  = 1.0
	sherpaFactorCPU   = 2.3
	sherpaArenaShare  = 0.10
	sherpaArenaMin    = 64 * MiB
	sherpaCUDARuntime = 256 * MiB
	sherpaRuntime     = 16 * MiB
)

// SherpaOnnx is the sherpa-onnx backend's profile.
const SherpaOnnx Backend = "sherpa-onnx"

func (e *Estimator) sherpaOnnx(req Request) (formula, error) {
	if len(req.ONNX) == 0 {
		return formula{}, fmt.Errorf("estimate: the %s profile needs the model's ONNX files: %w", SherpaOnnx, ErrBadRequest)
	}
	var init int64
	byType := map[string]int64{}
	for _, m := range req.ONNX {
		init += m.InitializerBytes
		for t, b := range m.ByType {
			byType[t] += b
		}
	}
	prec := dominantType(byType)
	cuda := e.cfg.Device != "cpu"
	factor, device := sherpaFactorCUDA, "CUDA provider"
	if !cuda {
		factor, device = sherpaFactorCPU, "CPU provider"
	}
	b := Breakdown{Weights: ceilMul(init, factor), Overhead: sherpaRuntime}
	b.Compute = sherpaArenaMin + 2*ceilMul(init, sherpaArenaShare)
	f := formula{model: req.Model, precision: prec, margin: 0.10}
	f.explain = []string{
		fmt.Sprintf("%s: %d ONNX file(s), %s of initializers (%s) × %.1f for the %s", req.Model, len(req.ONNX),
			units.FormatBytes(init), prec, factor, device),
		fmt.Sprintf("ONNX Runtime arena: %s + 2 × %.0f%% of the initializers (BFC arena doubles; gpu_mem_limit cannot be set through sherpa-onnx)",
			units.FormatBytes(sherpaArenaMin), 100*sherpaArenaShare),
	}
	if cuda {
		ctx, row, why := e.contextFor(req.GPUModel)
		b.Context, b.CUDARuntime = ctx, row.CuBLASWorkspaceBytes+sherpaCUDARuntime
		f.explain = append(f.explain, why, fmt.Sprintf("cuda_runtime: cuBLAS workspace %s + cuDNN and ONNX Runtime kernels %s (not measured)",
			units.FormatBytes(row.CuBLASWorkspaceBytes), units.FormatBytes(sherpaCUDARuntime)))
	}
	f.breakdown = b
	f.key = Key{Backend: SherpaOnnx, Model: modelID(req, req.Model), Precision: prec, Beam: 1, Batch: 1}
	return f, nil
}

// dominantType is the data type holding most initializer bytes.
func dominantType(byType map[string]int64) string {
	best, n := "float", int64(-1)
	for t, b := range byType {
		if b > n || (b == n && t < best) {
			best, n = t, b
		}
	}
	return best
}
