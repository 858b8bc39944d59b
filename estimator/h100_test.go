package estimator

import (
	"testing"
)

// h100Rows is ../shared/measurements/h100-whisper-cuda.md: NVML's
// per-process used memory after one transcription of jfk.wav (whisper.cpp
// CUDA, flash attention, the lease sized for best_of 5) on an NVIDIA H100
// 80GB HBM3, driver 580.159.04, CUDA 13.0.
var h100Rows = []struct {
	file        string
	measuredMiB int64
}{
	{"for-tests-ggml-tiny.bin", 890},
	{"for-tests-ggml-base.bin", 1000},
	{"for-tests-ggml-small.bin", 1466},
	{"for-tests-ggml-medium.bin", 2786},
	{"for-tests-ggml-large.bin", 4618},
}

// TestH100FirstRunNeverUnder holds the first-run estimate (no learning)
// against every row of the H100 table: the total is never under what the
// process used, and the lease (recommended) is at most 15 % over it.
func TestH100FirstRunNeverUnder(t *testing.T) {
	const gpu = "NVIDIA H100 80GB HBM3"
	for _, row := range h100Rows {
		t.Run(row.file, func(t *testing.T) {
			r, err := Estimate(Request{Backend: WhisperCpp, Model: row.file, Header: header(t, row.file), BestOf: 5,
				GPUs: []GPUFree{{Name: gpu, AvailableBytes: 80 * GiB}}})
			if err != nil {
				t.Fatal(err)
			}
			measured := row.measuredMiB * MiB
			margin := float64(r.RecommendedBytes-measured) / float64(measured) * 100
			t.Logf("total %.1f MiB, lease %.1f MiB, measured %d MiB, lease margin %+.1f %%",
				float64(r.TotalBytes)/float64(MiB), float64(r.RecommendedBytes)/float64(MiB), row.measuredMiB, margin)
			if r.TotalBytes < measured {
				t.Errorf("total %d B under the measured %d B", r.TotalBytes, measured)
			}
			if float64(r.RecommendedBytes) > 1.15*float64(measured) {
				t.Errorf("lease %d B more than 15 %% over the measured %d B (%+.1f %%)", r.RecommendedBytes, measured, margin)
			}
			if r.Breakdown.Context != 520*MiB || r.Breakdown.CUDARuntime < 32*MiB {
				t.Errorf("context %d, cuda_runtime %d: want the Hopper row", r.Breakdown.Context, r.Breakdown.CUDARuntime)
			}
			if r.Breakdown.Sum() != r.TotalBytes {
				t.Errorf("breakdown sums to %d, total %d", r.Breakdown.Sum(), r.TotalBytes)
			}
		})
	}
}

func TestOverheadRows(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA H100 80GB HBM3": "hopper", "NVIDIA H200": "hopper", "NVIDIA GH200 480GB": "hopper",
		"NVIDIA B200": "blackwell", "NVIDIA GeForce RTX 5090": "blackwell",
		"NVIDIA GeForce RTX 4090": "ada", "NVIDIA L4": "ada", "NVIDIA L40S": "ada", "NVIDIA RTX 6000 Ada Generation": "ada",
		"NVIDIA A100-SXM4-80GB": "ampere", "NVIDIA A10G": "ampere", "NVIDIA GeForce RTX 3060": "ampere", "NVIDIA RTX A6000": "ampere",
		"Tesla T4": "turing-volta", "Tesla V100-SXM2-16GB": "turing-volta",
		"": "unknown", "Some Future GPU": "unknown",
	} {
		if got := OverheadFor(name).Generation; got != want {
			t.Errorf("OverheadFor(%q) = %s, want %s", name, got, want)
		}
	}
}

// TestCUDAContextOverride: a configured cuda_context replaces the row's
// context on every GPU; 0 means by GPU.
func TestCUDAContextOverride(t *testing.T) {
	req := Request{Backend: WhisperCpp, Model: "tiny", GPUs: []GPUFree{{Name: "NVIDIA H100 80GB HBM3"}, {Index: 1, Name: "NVIDIA GeForce RTX 4090"}}}
	byGPU, err := New(Config{}, nil).Estimate(req)
	if err != nil {
		t.Fatal(err)
	}
	if byGPU.Breakdown.Context != 520*MiB || byGPU.GPUs[1].RecommendedBytes >= byGPU.GPUs[0].RecommendedBytes {
		t.Errorf("by GPU: context %d, lease H100 %d, RTX 4090 %d", byGPU.Breakdown.Context, byGPU.GPUs[0].RecommendedBytes, byGPU.GPUs[1].RecommendedBytes)
	}
	over, err := New(Config{CUDAContextBytes: 300 * MiB}, nil).Estimate(req)
	if err != nil {
		t.Fatal(err)
	}
	if over.Breakdown.Context != 300*MiB {
		t.Errorf("override: context %d, want 300 MiB", over.Breakdown.Context)
	}
}
