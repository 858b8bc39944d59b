package host

import (
	"log/slog"
	"math"
	"sync"

	"github.com/wsched/wsched/plugins"
)

// sanitizer is the boundary where a backend's reports enter the daemon:
// what a buggy or hostile backend sends must not reach the job table, the
// store or a JSON answer as NaN, ±Inf or negative times. Progress that is
// not a number is dropped and the rest clamped to 0–100; segment times are
// clamped to 0 and an end before its start is moved to the start. Each kind
// of repair is logged once per call.
type sanitizer struct {
	log    *slog.Logger
	warned sync.Map // what was repaired → struct{}
}

func (s *sanitizer) warn(what string, attrs ...any) {
	if _, dup := s.warned.LoadOrStore(what, struct{}{}); !dup {
		s.log.Warn("backend report repaired: "+what, attrs...)
	}
}

// emit wraps a Transcribe call's emit with the repairs.
func (s *sanitizer) emit(emit func(plugins.Event) error) func(plugins.Event) error {
	return func(ev plugins.Event) error {
		switch ev.Kind {
		case plugins.EventProgress:
			p, ok := s.progress(ev.Percent)
			if !ok {
				return nil
			}
			ev.Percent = p
		case plugins.EventSegment:
			ev.Segment = s.segment(ev.Segment)
		}
		if emit == nil {
			return nil
		}
		return emit(ev)
	}
}

func (s *sanitizer) progress(p float64) (float64, bool) {
	if math.IsNaN(p) || math.IsInf(p, 0) {
		s.warn("progress is not a number; dropped", "percent", p)
		return 0, false
	}
	if p < 0 || p > 100 {
		s.warn("progress outside 0–100; clamped", "percent", p)
	}
	return min(max(p, 0), 100), true
}

func (s *sanitizer) segment(seg plugins.Segment) plugins.Segment {
	if seg.Start < 0 || seg.End < seg.Start {
		s.warn("segment times out of order or negative; clamped", "start", seg.Start, "end", seg.End)
		seg.Start = max(seg.Start, 0)
		seg.End = max(seg.End, seg.Start)
	}
	return seg
}

// result repairs a finished call's result.
func (s *sanitizer) result(res *plugins.Result) {
	if res.Duration < 0 {
		s.warn("negative duration; set to 0", "duration", res.Duration)
		res.Duration = 0
	}
	for i := range res.Segments {
		res.Segments[i] = s.segment(res.Segments[i])
	}
}
