package chunk

import (
	"fmt"
	"time"
)

// PauseSearch is how far before each window's end PlanPauses looks for a
// pause: a window is at least size − PauseSearch long (20 s of 30 s).
const PauseSearch = 10 * time.Second

// pauseSmooth is the span over which frame energies are averaged before the
// quietest point is chosen (a pause is longer than a stop consonant).
const pauseSmooth = 200 * time.Millisecond

// PlanPauses cuts a recording into windows of at most size (DefaultWindow
// when 0) whose ends lie at pauses: energy[i] is the mean square of the
// samples of frame i (each frame long), and each window ends at the
// quietest point (energy averaged over 200 ms) in the last PauseSearch
// before its size is reached; ties go to the later point. A recording not
// longer than over (0: always cut) is one window; a last window shorter
// than a quarter of size is merged into the one before, as in Plan.
func PlanPauses(energy []float64, frame, duration, over, size time.Duration) ([]Window, error) {
	if size <= 0 {
		size = DefaultWindow
	}
	switch {
	case frame <= 0:
		return nil, fmt.Errorf("%w: frame %s: want above 0", ErrPlan, frame)
	case duration <= 0:
		return nil, fmt.Errorf("%w: duration %s: want above 0", ErrPlan, duration)
	case over < 0:
		return nil, fmt.Errorf("%w: chunk_over %s: want 0 or more", ErrPlan, over)
	case duration/size >= maxWindows/2:
		return nil, fmt.Errorf("%w: %s in %s windows is too many", ErrPlan, duration, size)
	}
	if over > 0 && duration <= over {
		return []Window{{Start: 0, End: duration}}, nil
	}
	smooth := smoothed(energy, max(1, int(pauseSmooth/frame)))
	search := min(PauseSearch, size*2/3)
	var out []Window
	for start := time.Duration(0); start < duration; {
		end := start + size
		if end >= duration {
			end = duration
		} else {
			end = quietest(smooth, frame, end-search, end)
		}
		out = append(out, Window{Index: len(out), Start: start, End: end})
		start = end
	}
	if n := len(out); n > 1 && out[n-1].Len() < size/4 {
		out[n-2].End = out[n-1].End
		out = out[:n-1]
	}
	return out, nil
}

// quietest is the start of the frame of least energy in [from, to); to
// when no frame of energy lies in it (the window is cut at its size).
func quietest(energy []float64, frame, from, to time.Duration) time.Duration {
	best, at := -1.0, to
	for i := int(from / frame); i >= 0 && i < len(energy) && time.Duration(i)*frame < to; i++ {
		if time.Duration(i)*frame < from {
			continue
		}
		if e := energy[i]; best < 0 || e <= best {
			best, at = e, time.Duration(i)*frame
		}
	}
	if at <= from { // never cut at the window's own start
		return to
	}
	return at
}

// smoothed averages energy over n frames centred on each.
func smoothed(energy []float64, n int) []float64 {
	out := make([]float64, len(energy))
	var sum float64
	lo, hi := 0, 0 // window [lo, hi)
	for i := range energy {
		for hi < len(energy) && hi <= i+n/2 {
			sum += energy[hi]
			hi++
		}
		for lo < i-n/2 {
			sum -= energy[lo]
			lo++
		}
		out[i] = sum / float64(hi-lo)
	}
	return out
}
