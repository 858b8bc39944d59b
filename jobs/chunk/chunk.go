// Package chunk cuts a long recording into windows that can run as separate
// backend calls — on free streams of any GPU — and stitches their
// transcripts back into one with the recording's timestamps (issue 26, long
// files across GPUs). It is pure: it plans (fixed windows, or windows that
// end at pauses found from frame energies) and joins; jobs/audiocut reads and
// writes the audio and the job manager runs the windows.
package chunk

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wsched/wsched/jobs/transcript"
)

// DefaultWindow is the window length without a VAD model: whisper's own
// 30 s input window.
const DefaultWindow = 30 * time.Second

// maxWindows bounds a plan (a day of audio in 30 s windows is 2,880).
const maxWindows = 100_000

// ErrPlan says a plan cannot be made or does not match its parts.
var ErrPlan = errors.New("chunk plan")

// Window is one piece of the recording, [Start, End).
type Window struct {
	Index      int
	Start, End time.Duration
}

// Len is the window's length.
func (w Window) Len() time.Duration { return w.End - w.Start }

// Plan cuts a recording of duration into windows of size (DefaultWindow
// when 0). A recording not longer than over (`[jobs] chunk_over`; 0: always
// cut) is one window. A last window shorter than a quarter of size is merged
// into the one before, so no call decodes a sliver.
func Plan(duration, over, size time.Duration) ([]Window, error) {
	if size <= 0 {
		size = DefaultWindow
	}
	switch {
	case duration <= 0:
		return nil, fmt.Errorf("%w: duration %s: want above 0", ErrPlan, duration)
	case over < 0:
		return nil, fmt.Errorf("%w: chunk_over %s: want 0 or more", ErrPlan, over)
	case duration/size >= maxWindows:
		return nil, fmt.Errorf("%w: %s in %s windows is more than %d", ErrPlan, duration, size, maxWindows)
	}
	if over > 0 && duration <= over {
		return []Window{{Start: 0, End: duration}}, nil
	}
	var out []Window
	for start := time.Duration(0); start < duration; start += size {
		out = append(out, Window{Index: len(out), Start: start, End: min(start+size, duration)})
	}
	if n := len(out); n > 1 && out[n-1].Len() < size/4 {
		out[n-2].End = out[n-1].End
		out = out[:n-1]
	}
	return out, nil
}

// Stitch joins the transcripts of the windows (parts[i] is window i's) into
// one: each segment moved by its window's start (a segment is kept within
// its window), segments renumbered from 0, texts joined by a space, the
// duration the last window's end, the task and language the first given.
func Stitch(ws []Window, parts []transcript.Transcript) (transcript.Transcript, error) {
	if len(ws) == 0 || len(ws) != len(parts) {
		return transcript.Transcript{}, fmt.Errorf("%w: %d windows, %d transcripts", ErrPlan, len(ws), len(parts))
	}
	var out transcript.Transcript
	var texts []string
	for i, w := range ws {
		p := parts[i]
		out.Task = firstNonEmpty(out.Task, p.Task)
		out.Language = firstNonEmpty(out.Language, p.Language)
		if t := strings.TrimSpace(p.Text); t != "" {
			texts = append(texts, t)
		}
		for _, s := range p.Segments {
			start, end := clamp(s.Start, w.Len()), clamp(s.End, w.Len())
			out.Segments = append(out.Segments, transcript.Segment{
				ID: len(out.Segments), Start: w.Start + start, End: w.Start + max(start, end), Text: s.Text,
			})
		}
	}
	out.Text = strings.Join(texts, " ")
	out.Duration = ws[len(ws)-1].End
	return out, nil
}

// Progress is the recording's progress in percent from each window's,
// weighted by the windows' lengths (values outside 0–100 are clamped).
func Progress(ws []Window, pct []float64) float64 {
	var done, total float64
	for i, w := range ws {
		l := w.Len().Seconds()
		total += l
		if i < len(pct) && pct[i] > 0 {
			done += l * min(pct[i], 100) / 100
		}
	}
	if total == 0 {
		return 0
	}
	return 100 * done / total
}

func clamp(d, limit time.Duration) time.Duration { return min(max(d, 0), limit) }

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
