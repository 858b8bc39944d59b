package estimator

import (
	"bytes"
	"strings"
	"testing"
)

// TestStreamsSplit: N streams in one instance hold the shared part once and
// the per-stream part N times; the breakdown still adds up; one stream is
// the plain estimate.
func TestStreamsSplit(t *testing.T) {
	for _, b := range Backends {
		one, err := Estimate(Request{Backend: b, Model: "large-v3", GPUModel: "NVIDIA H100 80GB HBM3"})
		if err != nil {
			t.Fatal(err)
		}
		if one.Streams == nil || one.Streams.Concurrency != 1 || one.Streams.SharedBytes+one.Streams.PerStreamBytes != one.TotalBytes {
			t.Fatalf("%s: one stream: %+v total %d", b, one.Streams, one.TotalBytes)
		}
		ten, err := Estimate(Request{Backend: b, Model: "large-v3", GPUModel: "NVIDIA H100 80GB HBM3", Concurrency: 10})
		if err != nil {
			t.Fatal(err)
		}
		s := ten.Streams
		if s.Concurrency != 10 || s.SharedBytes != one.Streams.SharedBytes || s.PerStreamBytes != one.Streams.PerStreamBytes {
			t.Fatalf("%s: ten streams %+v, one %+v", b, s, one.Streams)
		}
		if want := s.SharedBytes + 10*s.PerStreamBytes; ten.TotalBytes != want || s.TotalBytes != want {
			t.Errorf("%s: total %d, want %d", b, ten.TotalBytes, want)
		}
		if ten.Breakdown.Sum() != ten.TotalBytes || ten.RecommendedBytes < ten.TotalBytes {
			t.Errorf("%s: breakdown sum %d total %d recommended %d", b, ten.Breakdown.Sum(), ten.TotalBytes, ten.RecommendedBytes)
		}
		if s.ProcessPerJobBytes != 10*one.TotalBytes {
			t.Errorf("%s: process per job %d, want %d", b, s.ProcessPerJobBytes, 10*one.TotalBytes)
		}
	}
}

// TestStreamsWhisperCppParts: whisper.cpp shares weights, context and
// runtime; kv caches, compute buffers and the pool are per stream. The
// issue's figures: tiny ≈ 700 MiB shared, large ≥ 3× denser at 10 streams.
func TestStreamsWhisperCppParts(t *testing.T) {
	r, err := Estimate(Request{Model: "tiny", GPUModel: "NVIDIA H100 80GB HBM3", Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Streams
	if strings.Join(s.Shared, ",") != "weights,cuda_runtime,context" {
		t.Errorf("shared %v", s.Shared)
	}
	if strings.Join(s.PerStream, ",") != "kv_self,kv_cross,kv_pad,compute,cuda_pool" {
		t.Errorf("per stream %v", s.PerStream)
	}
	if one, _ := Estimate(Request{Model: "tiny", GPUModel: "NVIDIA H100 80GB HBM3"}); r.Breakdown.KVCross != 4*one.Breakdown.KVCross || r.Breakdown.Weights != one.Breakdown.Weights {
		t.Errorf("breakdown %+v", r.Breakdown)
	}
	large, err := Estimate(Request{Model: "large-v3", GPUModel: "NVIDIA H100 80GB HBM3", Concurrency: 10})
	if err != nil {
		t.Fatal(err)
	}
	if d := large.Streams.Density(); d < 3 {
		t.Errorf("large ×10: %.2f× denser, want ≥ 3 (%+v)", d, large.Streams)
	}
	var out bytes.Buffer
	if err := large.WriteText(&out, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"shared", "per stream", "10 in one instance", "streams: shared once per instance"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("tiny ×4: shared %d MiB, per stream %d MiB, total %d MiB; large ×10: %d MiB vs %d MiB (%.2f×)",
		s.SharedBytes>>20, s.PerStreamBytes>>20, s.TotalBytes>>20, large.Streams.TotalBytes>>20, large.Streams.ProcessPerJobBytes>>20, large.Streams.Density())
}

// TestStreamsRange: concurrency outside 0..1024 is a bad request.
func TestStreamsRange(t *testing.T) {
	for _, n := range []int{-1, 1025} {
		if _, err := Estimate(Request{Model: "tiny", Concurrency: n}); err == nil {
			t.Errorf("concurrency %d accepted", n)
		}
	}
}
