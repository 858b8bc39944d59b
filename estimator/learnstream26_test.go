package estimator

import (
	"strings"
	"testing"
)

// TestLearnedStreamPeaksRaisePerStreamPart (issue 26): peaks the streams
// report on their own are learned under the key's stream part and raise
// the per-stream part only; the shared part keeps what whole-process peaks
// taught it; the two are stored apart.
func TestLearnedStreamPeaksRaisePerStreamPart(t *testing.T) {
	store := NewMemStore(0)
	e := New(Config{}, store)
	req := Request{Backend: WhisperCpp, Model: "small", ModelID: "sha256:abc", Concurrency: 4,
		GPUs: []GPUFree{{Index: 0, Name: "NVIDIA L4", AvailableBytes: 20 * GiB}}}
	r0, err := e.Estimate(req)
	if err != nil {
		t.Fatal(err)
	}
	s0 := *r0.Streams
	if k := r0.Key.Stream(); k.String() == r0.Key.String() || !strings.HasSuffix(k.String(), `|"stream"`) {
		t.Fatalf("stream key %s, whole key %s: want them apart", k, r0.Key)
	}
	// A stream peak below the formula's per-stream part changes nothing.
	_ = store.RecordPeak(r0.Key.Stream(), s0.PerStreamBytes/2)
	if r, _ := e.Estimate(req); r.Streams.PerStreamBytes != s0.PerStreamBytes || r.TotalBytes != r0.TotalBytes {
		t.Fatalf("low stream peak: %+v", r.Streams)
	}
	// A higher one raises the per-stream part, with the margin, for every stream.
	high := s0.PerStreamBytes * 3
	_ = store.RecordPeak(r0.Key.Stream(), high)
	r1, _ := e.Estimate(req)
	s1 := r1.Streams
	per := ceilMul(high, 1.10)
	if s1.PerStreamBytes != per || s1.SharedBytes != s0.SharedBytes {
		t.Fatalf("high stream peak: per %d want %d, shared %d want %d", s1.PerStreamBytes, per, s1.SharedBytes, s0.SharedBytes)
	}
	if want := s1.SharedBytes + 4*per; r1.TotalBytes != want || r1.Breakdown.Sum() != want || r1.RecommendedBytes < want {
		t.Errorf("total %d breakdown %d recommended %d, want %d", r1.TotalBytes, r1.Breakdown.Sum(), r1.RecommendedBytes, want)
	}
	if !strings.Contains(strings.Join(r1.Explain, "\n"), "measured stream peaks") {
		t.Errorf("explain does not say the stream peaks apply: %q", r1.Explain)
	}
	// Whole-process peaks still raise the shared part, as before.
	_ = store.RecordPeak(r0.Key, r0.TotalBytes*3) // a one-stream process far above the formula
	one := req
	one.Concurrency = 1
	r2, _ := e.Estimate(one)
	if r2.Source != "learned" || r2.Streams.SharedBytes <= s0.SharedBytes || r2.Streams.PerStreamBytes != per {
		t.Errorf("whole-process peak: source %s, shared %d (was %d), per %d (want %d)", r2.Source, r2.Streams.SharedBytes, s0.SharedBytes, r2.Streams.PerStreamBytes, per)
	}
}
