package estimator

import (
	"errors"
	"testing"

	"github.com/wsched/wsched/estimator/onnx"
	"github.com/wsched/wsched/estimator/onnx/onnxtest"
)

func senseVoiceFile(t *testing.T, vocab int) *onnx.Model {
	t.Helper()
	path, err := onnxtest.WriteSenseVoice(t.TempDir(), onnxtest.SenseVoiceOptions{Vocab: vocab})
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSherpaOnnxProfile checks the terms: weights are the initializer bytes
// × the provider factor, the arena grows with them, and a GPU adds its
// overhead row's context and cuBLAS workspace.
func TestSherpaOnnxProfile(t *testing.T) {
	m := senseVoiceFile(t, 64)
	init := m.InitializerBytes
	gpu, err := New(Config{}, nil).Estimate(Request{Backend: SherpaOnnx, Model: "sv", ONNX: []*onnx.Model{m}, GPUs: []GPUFree{{Name: "NVIDIA H100 80GB HBM3", AvailableBytes: 80 * GiB}}})
	if err != nil {
		t.Fatal(err)
	}
	b := gpu.Breakdown
	if b.Weights != init || b.Context != 520*MiB || b.CUDARuntime != 32*MiB+sherpaCUDARuntime || b.Compute != sherpaArenaMin+2*ceilMul(init, sherpaArenaShare) || b.Overhead != sherpaRuntime {
		t.Errorf("GPU breakdown %+v (initializers %d)", b, init)
	}
	if gpu.Precision != "float" || gpu.Key.Backend != SherpaOnnx || gpu.TotalBytes != b.Sum() || gpu.RecommendedBytes != ceilMul(b.Sum(), 1.1) || !gpu.GPUs[0].Sufficient {
		t.Errorf("result %+v", gpu)
	}
	cpu, err := New(Config{Device: "cpu"}, nil).Estimate(Request{Backend: SherpaOnnx, Model: "sv", ONNX: []*onnx.Model{m}})
	if err != nil {
		t.Fatal(err)
	}
	if c := cpu.Breakdown; c.Context != 0 || c.CUDARuntime != 0 || c.Weights != ceilMul(init, sherpaFactorCPU) {
		t.Errorf("CPU breakdown %+v", c)
	}
	big, _ := New(Config{}, nil).Estimate(Request{Backend: SherpaOnnx, Model: "sv", ONNX: []*onnx.Model{senseVoiceFile(t, 4096)}})
	if grow := big.TotalBytes - gpu.TotalBytes; grow <= big.Breakdown.Weights-init {
		t.Errorf("64× the weights grew the total by %d only", grow)
	}
	// a Whisper directory: encoder and decoder both count
	two, _ := New(Config{}, nil).Estimate(Request{Backend: SherpaOnnx, Model: "w", ONNX: []*onnx.Model{m, m}})
	if two.Breakdown.Weights != 2*init {
		t.Errorf("two files: weights %d, want %d", two.Breakdown.Weights, 2*init)
	}
	if _, err := Estimate(Request{Backend: SherpaOnnx, Model: "small"}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("no files: %v, want ErrBadRequest", err)
	}
}

func TestDominantType(t *testing.T) {
	if got := dominantType(map[string]int64{"int8": 900, "float": 100}); got != "int8" {
		t.Errorf("int8 model: %q", got)
	}
	if got := dominantType(nil); got != "float" {
		t.Errorf("no initializers: %q", got)
	}
}
