package chunk

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/wsched/wsched/jobs/transcript"
)

const s = time.Second

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		duration, over time.Duration
		want           []Window
	}{
		{100 * s, 120 * s, []Window{{0, 0, 100 * s}}},
		{95 * s, 0, []Window{{0, 0, 30 * s}, {1, 30 * s, 60 * s}, {2, 60 * s, 95 * s}}}, // 5 s tail merged
		{100 * s, 0, []Window{{0, 0, 30 * s}, {1, 30 * s, 60 * s}, {2, 60 * s, 90 * s}, {3, 90 * s, 100 * s}}},
		{150 * s, 120 * s, []Window{{0, 0, 30 * s}, {1, 30 * s, 60 * s}, {2, 60 * s, 90 * s}, {3, 90 * s, 120 * s}, {4, 120 * s, 150 * s}}},
		{3 * s, 0, []Window{{0, 0, 3 * s}}},
	} {
		got, err := Plan(tc.duration, tc.over, 0)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Plan(%s, over %s) = %v, %v; want %v", tc.duration, tc.over, got, err, tc.want)
		}
		var total time.Duration
		for i, w := range got {
			if i > 0 && w.Start != got[i-1].End {
				t.Errorf("gap before window %d", i)
			}
			total += w.Len()
		}
		if total != tc.duration {
			t.Errorf("windows cover %s of %s", total, tc.duration)
		}
	}
	for _, bad := range [][3]time.Duration{{0, 0, 0}, {-s, 0, 0}, {s, -s, 0}, {24 * 365 * time.Hour, 0, time.Millisecond}} {
		if _, err := Plan(bad[0], bad[1], bad[2]); !errors.Is(err, ErrPlan) {
			t.Errorf("Plan%v: %v", bad, err)
		}
	}
}

// TestStitch: timestamps move by the window's start, IDs run on, texts join,
// a segment past its window's end is kept inside it.
func TestStitch(t *testing.T) {
	ws, _ := Plan(70*s, 0, 0)
	parts := []transcript.Transcript{
		{Task: "transcribe", Language: "en", Text: " one two ", Segments: []transcript.Segment{{ID: 0, Start: 0, End: 2 * s, Text: "one"}, {ID: 1, Start: 20 * s, End: 29 * s, Text: "two"}}},
		{Language: "en", Text: "", Segments: nil},
		{Text: "three", Segments: []transcript.Segment{{ID: 0, Start: s, End: 40 * s, Text: "three"}}},
	}
	got, err := Stitch(ws, parts)
	if err != nil {
		t.Fatal(err)
	}
	want := transcript.Transcript{Task: "transcribe", Language: "en", Duration: 70 * s, Text: "one two three", Segments: []transcript.Segment{
		{ID: 0, Start: 0, End: 2 * s, Text: "one"}, {ID: 1, Start: 20 * s, End: 29 * s, Text: "two"}, {ID: 2, Start: 61 * s, End: 70 * s, Text: "three"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stitched\n%+v\nwant\n%+v", got, want)
	}
	if _, err := Stitch(ws, parts[:2]); !errors.Is(err, ErrPlan) {
		t.Errorf("fewer parts than windows: %v", err)
	}
}

func TestProgress(t *testing.T) {
	ws, _ := Plan(70*s, 0, 0) // 30 s, 30 s, 10 s
	for _, tc := range []struct {
		pct  []float64
		want float64
	}{
		{nil, 0}, {[]float64{100, 100, 100}, 100}, {[]float64{100, 0, 0}, 100 * 30.0 / 70}, {[]float64{0, 0, 100}, 100 * 10.0 / 70},
		{[]float64{250, -5, math.NaN()}, 100 * 30.0 / 70},
	} {
		if got := Progress(ws, tc.pct); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Progress(%v) = %v, want %v", tc.pct, got, tc.want)
		}
	}
}
