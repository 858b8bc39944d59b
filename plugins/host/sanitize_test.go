package host

import (
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/wsched/wsched/plugins"
)

// TestSanitizeReports: progress that is not a number never reaches the
// caller, the rest is clamped to 0–100, and segment times are repaired.
func TestSanitizeReports(t *testing.T) {
	s := &sanitizer{log: slog.New(slog.DiscardHandler)}
	var got []plugins.Event
	emit := s.emit(func(ev plugins.Event) error { got = append(got, ev); return nil })
	for _, p := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -5, 42, 250} {
		_ = emit(plugins.ProgressEvent(p))
	}
	_ = emit(plugins.SegmentEvent(plugins.Segment{Start: -time.Second, End: -2 * time.Second, Text: "x"}))
	want := []float64{0, 42, 100}
	if len(got) != 4 {
		t.Fatalf("events %+v, want 3 progress and 1 segment", got)
	}
	for i, w := range want {
		if got[i].Percent != w {
			t.Errorf("progress %d = %v, want %v", i, got[i].Percent, w)
		}
	}
	if seg := got[3].Segment; seg.Start != 0 || seg.End != 0 {
		t.Errorf("segment %+v, want 0–0", seg)
	}
	res := plugins.Result{Duration: -time.Second, Segments: []plugins.Segment{{Start: 2 * time.Second, End: time.Second}}}
	s.result(&res)
	if res.Duration != 0 || res.Segments[0].End != 2*time.Second {
		t.Errorf("result %+v", res)
	}
}
