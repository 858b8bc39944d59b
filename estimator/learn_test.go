package estimator

import (
	"strings"
	"testing"

	"github.com/wsched/wsched/internal/units"
)

func TestPercentile(t *testing.T) {
	xs := []int64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for p, want := range map[float64]int64{0.5: 5, 0.9: 9, 0.95: 10, 1: 10, 0.01: 1} {
		if got := Percentile(xs, p); got != want {
			t.Errorf("p%.2f = %d, want %d", p, got, want)
		}
	}
	if Percentile[int64](nil, 0.9) != 0 {
		t.Error("empty")
	}
}

func TestLearnedPeakRaisesEstimate(t *testing.T) {
	store := NewMemStore(0)
	e := New(Config{}, store)
	req := Request{Backend: WhisperCpp, Model: "small", ModelID: "sha256:abc", GPUs: []GPUFree{{Index: 0, Name: "NVIDIA L4", AvailableBytes: 20 * GiB}}}
	r0, err := e.Estimate(req)
	if err != nil {
		t.Fatal(err)
	}
	if r0.Source != "formula" || r0.Key.Model != "sha256:abc" || r0.Key.GPUModel != "NVIDIA L4" {
		t.Fatalf("before learning: %s %+v", r0.Source, r0.Key)
	}
	// Peaks below the formula leave it in charge.
	for _, p := range []int64{r0.FormulaBytes / 2, r0.FormulaBytes / 3} {
		if err := store.RecordPeak(r0.Key, p); err != nil {
			t.Fatal(err)
		}
	}
	r1, _ := e.Estimate(req)
	if r1.Source != "formula" || r1.TotalBytes != r0.TotalBytes || !strings.Contains(strings.Join(r1.Explain, "\n"), "formula is higher") {
		t.Fatalf("low peaks: %s %d %q", r1.Source, r1.TotalBytes, r1.Explain)
	}
	// A peak above it takes over, with the margin, and the breakdown says so.
	high := r0.FormulaBytes * 2
	_ = store.RecordPeak(r0.Key, high)
	r2, _ := e.Estimate(req)
	want := ceilMul(high, 1.10)
	if r2.Source != "learned" || r2.TotalBytes != want || r2.Breakdown.Sum() != want || r2.Breakdown.Learned != want-r0.FormulaBytes {
		t.Fatalf("high peak: %s total %d want %d, breakdown sum %d", r2.Source, r2.TotalBytes, want, r2.Breakdown.Sum())
	}
	if r2.RecommendedBytes < r2.TotalBytes || r2.GPUs[0].RecommendedBytes != r2.RecommendedBytes {
		t.Errorf("recommended %d total %d gpu %+v", r2.RecommendedBytes, r2.TotalBytes, r2.GPUs[0])
	}
	// Another GPU model, another key: formula again.
	other := req
	other.GPUs = []GPUFree{{Name: "NVIDIA H100", AvailableBytes: 80 * GiB}}
	if r3, _ := e.Estimate(other); r3.Source != "formula" {
		t.Errorf("other GPU model learned from L4 peaks")
	}
	// Another beam size, another key.
	beam := req
	beam.Beam = 4
	if r4, _ := e.Estimate(beam); r4.Source != "formula" || r4.Key.Beam != 4 {
		t.Errorf("beam 4: %s %+v", r4.Source, r4.Key)
	}
}

func TestLearnedContextPerGPUModel(t *testing.T) {
	store := NewMemStore(3)
	e := New(Config{CUDAContextBytes: 300 * MiB}, store)
	for _, c := range []int64{500 * MiB, 510 * MiB, 520 * MiB, 530 * MiB} { // limit 3 drops the first
		_ = store.RecordContext("NVIDIA A10", c)
	}
	req := Request{Model: "tiny", GPUs: []GPUFree{{Index: 0, Name: "NVIDIA A10", AvailableBytes: 8 * GiB}, {Index: 1, Name: "Tesla T4", AvailableBytes: 8 * GiB}}}
	r, err := e.Estimate(req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Breakdown.Context != 530*MiB {
		t.Errorf("learned context %s, want 530 MiB", units.FormatBytes(r.Breakdown.Context))
	}
	if d := r.GPUs[0].RecommendedBytes - r.GPUs[1].RecommendedBytes; d < 200*MiB {
		t.Errorf("T4 (no context learned, 300 MiB) should need ~230 MiB less than A10: %d", d)
	}
	if got, _ := store.Contexts("NVIDIA A10"); len(got) != 3 || got[0] != 510*MiB {
		t.Errorf("limit not applied: %v", got)
	}
	if err := store.RecordPeak(Key{}, 0); err == nil {
		t.Error("zero peak accepted")
	}
	// Seed has no context term: learned context must not add one.
	rs, _ := e.Estimate(Request{Backend: Seed, Model: "tiny", GPUModel: "NVIDIA A10"})
	if rs.Breakdown.Context != 0 {
		t.Error("seed got a context")
	}
}

func TestKeyString(t *testing.T) {
	a := Key{Backend: WhisperCpp, Model: "a|b", Precision: "f16", Beam: 1, Batch: 1, GPUModel: "x"}
	b := Key{Backend: WhisperCpp, Model: "a", Precision: "b|f16", Beam: 1, Batch: 1, GPUModel: "x"}
	if a.String() == b.String() {
		t.Error("ambiguous key encoding")
	}
}

// TestLearnedPerDriverMajor (issue 13): learned peaks are kept per driver
// major version; a key without a driver keeps its old encoding.
func TestLearnedPerDriverMajor(t *testing.T) {
	for v, want := range map[string]string{"550.54.15": "550", "535": "535", "sim": "", "": "", ".1": ""} {
		if got := DriverMajor(v); got != want {
			t.Errorf("DriverMajor(%q) = %q, want %q", v, got, want)
		}
	}
	k := Key{Backend: WhisperCpp, Model: "m", GPUModel: "NVIDIA L4"}
	if s := k.String(); strings.Count(s, "|") != 5 {
		t.Errorf("driverless key %s", s)
	}
	store := NewMemStore(0)
	e := New(Config{}, store)
	req := Request{Backend: WhisperCpp, Model: "small", ModelID: "sha256:abc", Driver: "550.54.15",
		GPUs: []GPUFree{{Index: 0, Name: "NVIDIA L4", AvailableBytes: 20 * GiB}}}
	r0, err := e.Estimate(req)
	if err != nil || r0.Key.Driver != "550" {
		t.Fatalf("key %+v, %v", r0.Key, err)
	}
	_ = store.RecordPeak(r0.Key, 2*r0.FormulaBytes)
	if r1, _ := e.Estimate(req); r1.Source != "learned" {
		t.Errorf("same driver major: %s", r1.Source)
	}
	req.Driver = "560.28.03"
	if r2, _ := e.Estimate(req); r2.Source != "formula" || r2.Key.Driver != "560" {
		t.Errorf("another driver learned from 550's peaks: %s %+v", r2.Source, r2.Key)
	}
}

// The context learned from a backend's first sample applies to its GPU model
// and driver major only, and never lowers the row's figure.
func TestLearnedContextPerDriver(t *testing.T) {
	store := NewMemStore(0)
	e := New(Config{}, store)
	const h100 = "NVIDIA H100 80GB HBM3"
	_ = store.RecordContext(ContextKey(h100, "580.159.04"), 610*MiB)
	_ = store.RecordContext(ContextKey("NVIDIA L4", "580.159.04"), 300*MiB) // below the ada row's 400 MiB
	for _, tt := range []struct {
		gpu, driver string
		want        int64
	}{
		{h100, "580.65.06", 610 * MiB},
		{h100, "570.1", 520 * MiB},
		{h100, "", 520 * MiB},
		{"NVIDIA L4", "580.1", 400 * MiB},
	} {
		r, err := e.Estimate(Request{Model: "tiny", GPUModel: tt.gpu, Driver: tt.driver})
		if err != nil {
			t.Fatal(err)
		}
		if r.Breakdown.Context != tt.want {
			t.Errorf("%s driver %q: context %s, want %s (%v)", tt.gpu, tt.driver,
				units.FormatBytes(r.Breakdown.Context), units.FormatBytes(tt.want), r.Explain)
		}
	}
	if got := ContextKey(h100, "580.159.04"); got != h100+"|580" {
		t.Errorf("ContextKey = %q", got)
	}
}
