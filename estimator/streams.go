package estimator

import (
	"fmt"

	"github.com/wsched/wsched/internal/units"
)

// Streams splits an estimate into what one backend instance holds once
// (the CUDA context, the weights, the runtime) and what each concurrent
// decoding stream adds (its KV caches, compute buffers and memory pool), and
// gives the total for Concurrency streams in one instance.
type Streams struct {
	// Concurrency is the number of streams the totals are for.
	Concurrency int `json:"concurrency"`
	// SharedBytes is held once per instance: weights, context, CUDA
	// runtime, the profile's fixed overhead and any learned excess.
	SharedBytes int64 `json:"shared_bytes"`
	// PerStreamBytes is what each stream adds: kv_self, kv_cross, kv_pad,
	// compute, cuda_pool, transient-free activations, audio and batch.
	PerStreamBytes int64 `json:"per_stream_bytes"`
	// TotalBytes is SharedBytes + Concurrency × PerStreamBytes (the
	// Result's TotalBytes).
	TotalBytes int64 `json:"total_bytes"`
	// ProcessPerJobBytes is Concurrency one-stream processes: what the
	// same work holds without sharing.
	ProcessPerJobBytes int64 `json:"process_per_job_bytes"`
	// Shared and PerStream name the breakdown components of each part.
	Shared    []string `json:"shared"`
	PerStream []string `json:"per_stream"`
}

// Density is how many times more streams fit in the same memory shared
// than as one process per job (ProcessPerJobBytes / TotalBytes).
func (s Streams) Density() float64 {
	if s.TotalBytes <= 0 {
		return 0
	}
	return float64(s.ProcessPerJobBytes) / float64(s.TotalBytes)
}

// perStream is the part of b one decoding stream needs on its own.
func (b Breakdown) perStream() Breakdown {
	return Breakdown{
		KVSelf: b.KVSelf, KVCross: b.KVCross, KVPad: b.KVPad, Compute: b.Compute,
		ComputeConv: b.ComputeConv, ComputeEncode: b.ComputeEncode, ComputeCross: b.ComputeCross, ComputeDecode: b.ComputeDecode,
		CUDAPool: b.CUDAPool, Activations: b.Activations, Audio: b.Audio, Batch: b.Batch,
	}
}

// plusTimes adds n × o to b, component by component.
func (b Breakdown) plusTimes(o Breakdown, n int64) Breakdown {
	return Breakdown{
		Weights: b.Weights + n*o.Weights, KVSelf: b.KVSelf + n*o.KVSelf, KVCross: b.KVCross + n*o.KVCross, KVPad: b.KVPad + n*o.KVPad,
		Compute: b.Compute + n*o.Compute, Context: b.Context + n*o.Context,
		ComputeConv: b.ComputeConv + n*o.ComputeConv, ComputeEncode: b.ComputeEncode + n*o.ComputeEncode,
		ComputeCross: b.ComputeCross + n*o.ComputeCross, ComputeDecode: b.ComputeDecode + n*o.ComputeDecode,
		CUDAPool: b.CUDAPool + n*o.CUDAPool, CUDARuntime: b.CUDARuntime + n*o.CUDARuntime, Transient: b.Transient + n*o.Transient,
		Activations: b.Activations + n*o.Activations, Audio: b.Audio + n*o.Audio, Batch: b.Batch + n*o.Batch,
		Overhead: b.Overhead + n*o.Overhead, Learned: b.Learned + n*o.Learned,
	}
}

// applyStreams turns a one-stream result into the result for n streams in
// one instance: the per-stream components are counted n times, the shared
// ones (and a learned excess, measured on one-stream processes) once.
// learned, when above the formula's per-stream part, is the streams' own
// measured peak (learnedStream): it raises the per-stream part alone, for
// every stream the first included. RecommendedBytes grows by the extra
// streams with the profile's margin.
func applyStreams(res *Result, n int, margin float64, learned int64) {
	one := res.Breakdown.perStream()
	formulaPer := one.Sum()
	shared := res.TotalBytes - formulaPer
	sharedNames, perNames := names(res.Breakdown, one), names(one, Breakdown{})
	per := formulaPer
	if learned > per {
		raise := learned - per
		one.Learned, per = raise, learned
		res.Breakdown.Learned += raise
		res.TotalBytes += raise
		res.RecommendedBytes += ceilMul(raise, 1+margin)
		perNames = append(perNames, "learned_stream")
	}
	s := &Streams{
		Concurrency: max(1, n), SharedBytes: shared, PerStreamBytes: per,
		Shared: sharedNames, PerStream: perNames,
	}
	extra := int64(s.Concurrency - 1)
	if extra > 0 {
		res.Breakdown = res.Breakdown.plusTimes(one, extra)
		res.FormulaBytes += extra * formulaPer
		res.TotalBytes += extra * per
		res.RecommendedBytes += ceilMul(extra*per, 1+margin)
	}
	s.TotalBytes = res.TotalBytes
	s.ProcessPerJobBytes = int64(s.Concurrency) * (shared + per)
	res.Streams = s
	res.Explain = append(res.Explain, streamsExplain(*s, res.Backend)...)
}

// names lists the non-zero components of b that are not in sub.
func names(b, sub Breakdown) []string {
	skip := map[string]bool{}
	for _, c := range sub.components() {
		skip[c.name] = true
	}
	out := []string{}
	for _, c := range b.components() {
		if !skip[c.name] {
			out = append(out, c.name)
		}
	}
	return out
}

func streamsExplain(s Streams, b Backend) []string {
	out := []string{
		fmt.Sprintf("streams: shared once per instance %s (%v); per stream %s (%v)",
			units.FormatBytes(s.SharedBytes), s.Shared, units.FormatBytes(s.PerStreamBytes), s.PerStream),
		fmt.Sprintf("streams: %d in one instance = %s + %d × %s = %s; as %d processes %s (%.2f× more streams per GiB shared)",
			s.Concurrency, units.FormatBytes(s.SharedBytes), s.Concurrency, units.FormatBytes(s.PerStreamBytes),
			units.FormatBytes(s.TotalBytes), s.Concurrency, units.FormatBytes(s.ProcessPerJobBytes), s.Density()),
	}
	if b == WhisperCpp {
		out = append(out, "streams: whisper.cpp shares one context (weights) and gives each stream its own state (kv caches, compute buffers, ggml-cuda pool)")
	}
	return out
}
