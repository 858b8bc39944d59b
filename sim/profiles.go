package sim

import (
	"fmt"
	"strings"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/jobs"
)

// H100 is the GPU the built-in tables were measured on.
const H100 = "NVIDIA H100 80GB HBM3"

// h100Bytes is the H100's memory as NVML reports it (81,559 MiB).
const h100Bytes = 81559 * estimator.MiB

// driverReservedBytes is what NVML shows used on an H100 with no process
// (../shared/measurements/h100-whisper-cuda.md: 480 MiB); the simulated GPU
// reports it as foreign memory.
const driverReservedBytes = 480 * estimator.MiB

// Profile is how the simulator models one model's backend on one GPU model.
type Profile struct {
	Model string
	// SharedBytes and PerStreamBytes are the estimator's lease parts for
	// one instance (weights, context, runtime) and each stream (best_of 5,
	// as `wsched transcribe` reserves).
	SharedBytes, PerStreamBytes int64
	// ProcessBytes is NVML's per-process memory of a one-stream process
	// (measured); a stream beyond the first adds PerStreamBytes scaled by
	// ProcessBytes / (SharedBytes + PerStreamBytes).
	ProcessBytes int64
	// RTF is processing seconds per audio second of one stream.
	RTF float64
	// LoadSeconds is the time to start an instance (process, CUDA context,
	// weights) before its first stream runs.
	LoadSeconds float64
}

// ActualBytes is what an instance of n streams holds on the GPU.
func (p Profile) ActualBytes(n int) int64 {
	if n < 1 {
		n = 1
	}
	scale := float64(p.ProcessBytes) / float64(p.SharedBytes+p.PerStreamBytes)
	return p.ProcessBytes + int64(float64(int64(n-1)*p.PerStreamBytes)*scale)
}

// LeaseBytes is the lease of an instance of n streams (at least one).
func (p Profile) LeaseBytes(n int) int64 { return p.SharedBytes + int64(max(1, n))*p.PerStreamBytes }

// nvmlH100 is NVML's per-process used memory after one transcription on the
// H100, by model family (the measured table).
var nvmlH100 = map[string]int64{
	"tiny": 890 * estimator.MiB, "base": 1000 * estimator.MiB, "small": 1466 * estimator.MiB,
	"medium": 2786 * estimator.MiB, "large": 4618 * estimator.MiB,
}

// loadSeconds: a cold tiny transcription of jfk.wav took 0.5–1.2 s on the
// H100 (measured); larger models read more weights (assumed ≈ 1.5 GB/s from
// the page cache, plus the CUDA context).
var loadSeconds = map[string]float64{"tiny": 0.5, "base": 0.6, "small": 0.9, "medium": 1.5, "large": 2.5}

// familyModel is the estimator's model that stands for a family.
var familyModel = map[string]string{"tiny": "tiny", "base": "base", "small": "small", "medium": "medium", "large": "large-v3"}

func family(model string) string {
	for _, f := range []string{"tiny", "base", "small", "medium", "large"} {
		if strings.Contains(model, f) {
			return f
		}
	}
	return ""
}

// H100Profile is the profile of a whisper.cpp model on the H100: lease
// parts from the estimator, per-process memory measured, RTF from
// jobs.DefaultRTF (tiny measured, the others scaled), load time as above.
func H100Profile(model string) (Profile, error) {
	f := family(model)
	nvml, ok := nvmlH100[f]
	if !ok {
		return Profile{}, fmt.Errorf("sim: no measured H100 figures for model %q (tiny, base, small, medium, large*)", model)
	}
	r, err := estimator.Estimate(estimator.Request{Model: model, BestOf: 5, GPUModel: H100})
	if err != nil { // a daemon's own model name (a trace): its family's figures
		r, err = estimator.Estimate(estimator.Request{Model: familyModel[f], BestOf: 5, GPUModel: H100})
	}
	if err != nil {
		return Profile{}, fmt.Errorf("sim: estimate %s: %w", model, err)
	}
	return Profile{
		Model: model, SharedBytes: r.Streams.SharedBytes, PerStreamBytes: r.Streams.PerStreamBytes,
		ProcessBytes: nvml, RTF: jobs.DefaultRTF(model, true), LoadSeconds: loadSeconds[f],
	}, nil
}
