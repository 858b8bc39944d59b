package estimator

import (
	"math"
	"testing"
)

// TestPyTorchReadme: openai-whisper's README lists ~1/1/2/5/10/6 GB for
// tiny/base/small/medium/large/turbo. The profile (greedy, batch 1) must be
// at most that figure and, for the models big enough that weights dominate,
// within 25% of it. The README names no GPU; the figures are taken with the
// Ada row's 400 MiB context (an RTX 4090).
func TestPyTorchReadme(t *testing.T) {
	for _, c := range []struct {
		model string
		gb    float64
	}{{"tiny", 1}, {"base", 1}, {"small", 2}, {"medium", 5}, {"large-v2", 10}, {"turbo", 6}} {
		r, err := Estimate(Request{Backend: PyTorch, Model: c.model, GPUModel: readmeGPU})
		if err != nil {
			t.Fatal(err)
		}
		got := float64(r.TotalBytes) / 1e9
		if got > c.gb*1.05 {
			t.Errorf("%s: %.2f GB above the README's ~%.0f GB", c.model, got, c.gb)
		}
		if c.gb >= 2 && got < c.gb*0.75 {
			t.Errorf("%s: %.2f GB far below the README's ~%.0f GB", c.model, got, c.gb)
		}
		if r.Breakdown.Sum() != r.TotalBytes || r.Breakdown.Transient*2 != r.Breakdown.Weights {
			t.Errorf("%s: breakdown %+v", c.model, r.Breakdown)
		}
	}
	// faster-whisper README: openai/whisper large-v2, fp16, beam 5: 11,325 MB.
	r, _ := Estimate(Request{Backend: PyTorch, Model: "large-v2", Beam: 5, GPUModel: benchGPU})
	if got := float64(r.TotalBytes) / 1e6; math.Abs(got-11325)/11325 > 0.05 {
		t.Errorf("large-v2 beam 5: %.0f MB, measured 11325 MB", got)
	}
}

const (
	readmeGPU = "NVIDIA GeForce RTX 4090"
	// benchGPU ran faster-whisper's published benchmarks.
	benchGPU = "NVIDIA GeForce RTX 3070 Ti"
)

// TestFasterWhisperBenchmarks: published peaks (beam 5, 13 min audio, an
// RTX 3070 Ti).
func TestFasterWhisperBenchmarks(t *testing.T) {
	for _, c := range []struct {
		model, prec string
		mb          float64
		tol         float64
	}{
		{"large-v3", "float16", 4521, 0.02}, {"large-v3", "int8", 2953, 0.03},
		{"large-v3-turbo", "float16", 2537, 0.02}, {"large-v3-turbo", "int8", 1545, 0.15},
		{"large-v2", "float16", 4755, 0.06}, {"large-v2", "int8", 3091, 0.05},
	} {
		r, err := Estimate(Request{Backend: FasterWhisper, Model: c.model, Precision: c.prec, Beam: 5, GPUModel: benchGPU})
		if err != nil {
			t.Fatal(err)
		}
		got := float64(r.TotalBytes) / 1e6
		if math.Abs(got-c.mb)/c.mb > c.tol {
			t.Errorf("%s %s: %.0f MB, benchmark %.0f MB (±%.0f%%)", c.model, c.prec, got, c.mb, c.tol*100)
		}
	}
	if _, err := Estimate(Request{Backend: FasterWhisper, Model: "tiny", Precision: "q5_0"}); err == nil {
		t.Error("q5_0 is not a CTranslate2 compute type")
	}
}
