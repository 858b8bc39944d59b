package estimator

import (
	"errors"
	"math"
	"testing"

	"github.com/wsched/wsched/internal/units"
)

func gb(b int64) float64 { return float64(b) / float64(GiB) }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// TestSeedTable: the seed's base-memory table, every cell.
func TestSeedTable(t *testing.T) {
	want := map[string][4]float64{
		"tiny": {1.5, 0.8, 0.4, 0.2}, "base": {2.0, 1.0, 0.5, 0.25}, "small": {3.0, 1.5, 0.75, 0.375},
		"medium": {5.0, 2.5, 1.25, 0.625}, "large": {10, 5, 2.5, 1.25}, "large-v2": {10, 5, 2.5, 1.25}, "large-v3": {10, 5, 2.5, 1.25},
	}
	for model, row := range want {
		for i, prec := range []string{"float32", "float16", "int8", "int4"} {
			r, err := Estimate(Request{Backend: Seed, Model: model, Precision: prec})
			if err != nil {
				t.Fatal(err)
			}
			if !near(gb(r.Breakdown.Weights), row[i]) {
				t.Errorf("%s %s: base %.3f GB, seed table %.3f", model, prec, gb(r.Breakdown.Weights), row[i])
			}
		}
	}
}

// TestSeedExamples reproduces the seed's formulas on its own example calls.
func TestSeedExamples(t *testing.T) {
	cases := []struct {
		name                   string
		req                    Request
		audio, batch, overhead float64
		total, recommended     float64
	}{
		// calculate_memory_usage("medium")
		{"medium", Request{Model: "medium"}, 0.375, 0.575, 0.76875, 4.21875, 5.0625},
		// calculate_memory_usage("large", segment_duration=600, batch_size=2, precision="int8")
		{"large 600s b2 int8", Request{Model: "large", SegmentSeconds: 600, Batch: 2, Precision: "int8"}, 7.5, 15.2, 4.425, 29.625, 35.55},
		// check_gpu_memory_sufficient("medium", segment_duration=300, precision="float16")
		{"medium 300s", Request{Model: "medium", SegmentSeconds: 300, Precision: "float16"}, 3.75, 3.95, 1.6125, 11.8125, 14.175},
	}
	for _, c := range cases {
		c.req.Backend = Seed
		r, err := Estimate(c.req)
		if err != nil {
			t.Fatal(err)
		}
		b := r.Breakdown
		if !near(gb(b.Audio), c.audio) || !near(gb(b.Batch), c.batch) || !near(gb(b.Overhead), c.overhead) {
			t.Errorf("%s: audio %.5f batch %.5f overhead %.5f", c.name, gb(b.Audio), gb(b.Batch), gb(b.Overhead))
		}
		if !near(gb(r.TotalBytes), c.total) || !near(gb(r.RecommendedBytes), c.recommended) {
			t.Errorf("%s: total %.5f rec %.5f, want %.5f %.5f", c.name, gb(r.TotalBytes), gb(r.RecommendedBytes), c.total, c.recommended)
		}
	}
	// The seed's segment loop for medium: 30, 60, 120, 300, 600 s.
	want := map[float64]float64{30: 5.0625, 60: 6.075, 120: 8.1, 300: 14.175, 600: 24.3}
	for seg, rec := range want {
		r, _ := Estimate(Request{Backend: Seed, Model: "medium", SegmentSeconds: seg})
		if !near(gb(r.RecommendedBytes), rec) {
			t.Errorf("medium %v s: recommended %.4f GB, want %.4f", seg, gb(r.RecommendedBytes), rec)
		}
	}
	// Its precision loop for large.
	for prec, rec := range map[string]float64{"float32": 19.35, "float16": 9.825, "int8": 5.0625, "int4": 2.68125} {
		r, _ := Estimate(Request{Backend: Seed, Model: "large", Precision: prec})
		if !near(gb(r.RecommendedBytes), rec) {
			t.Errorf("large %s: recommended %.5f, want %.5f", prec, gb(r.RecommendedBytes), rec)
		}
	}
}

// TestSeedTiers checks the seed's prose ("tiny/base < 2GB, small 2-3GB,
// medium 5-8GB, large 10-20GB") against its own formula at its defaults:
// true for the totals of tiny, base, small, the recommendation of medium,
// and for large only in float32.
func TestSeedTiers(t *testing.T) {
	est := func(m, p string) Result { r, _ := Estimate(Request{Backend: Seed, Model: m, Precision: p}); return r }
	if gb(est("tiny", "").TotalBytes) >= 2 || gb(est("base", "").TotalBytes) >= 2 {
		t.Error("tiny/base not < 2 GB")
	}
	if s := gb(est("small", "").TotalBytes); s < 2 || s > 3 {
		t.Errorf("small %.2f not in 2-3 GB", s)
	}
	if m := gb(est("medium", "").RecommendedBytes); m < 5 || m > 8 {
		t.Errorf("medium %.2f not in 5-8 GB", m)
	}
	if l := gb(est("large", "float32").RecommendedBytes); l < 10 || l > 20 {
		t.Errorf("large f32 %.2f not in 10-20 GB", l)
	}
}

// TestSeedAssignOptimalModel: assign_optimal_model picks the first of
// large, medium, small, base, tiny whose recommendation fits, else tiny.
func TestSeedAssignOptimalModel(t *testing.T) {
	e := New(Config{}, nil)
	for _, c := range []struct {
		avail int64
		want  string
		fits  bool
	}{{24 * GiB, "large", true}, {8 * GiB, "medium", true}, {6 * GiB, "medium", true}, {16 * GiB / 5, "small", true}, {3 * GiB, "base", true}, {2 * GiB, "tiny", true}, {1 * GiB, "tiny", false}} {
		name, _, fits, err := e.LargestModel(Request{Backend: Seed}, c.avail)
		if err != nil || name != c.want || fits != c.fits {
			t.Errorf("%s: %s %v %v, want %s %v", units.FormatBytes(c.avail), name, fits, err, c.want, c.fits)
		}
	}
	if _, err := Estimate(Request{Backend: Seed, Model: "turbo"}); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("turbo is not in the seed table: %v", err)
	}
	r, _ := Estimate(Request{Backend: Seed, Model: "medium", SegmentSeconds: 300})
	if len(r.Suggestions) == 0 || r.Suggestions[0][:7] != "shorter" {
		t.Errorf("seed suggestions %q", r.Suggestions)
	}
}
