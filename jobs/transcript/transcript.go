// Package transcript renders a transcription in the formats clients ask for:
// OpenAI's json, text, srt, vtt and verbose_json response formats, which the
// CLI also writes to files (txt is text).
package transcript

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// ErrFormat is returned (wrapped) for an unknown format name.
var ErrFormat = errors.New("unknown response format")

// Formats lists the accepted format names.
var Formats = []string{"json", "text", "srt", "vtt", "verbose_json"}

// Transcript is a finished transcription.
type Transcript struct {
	// Task is "transcribe" or "translate".
	Task string
	// Language is an ISO 639-1 code ("en").
	Language string
	Duration time.Duration
	Text     string
	Segments []Segment
}

// Segment is a timed piece of the text.
type Segment struct {
	ID         int
	Start, End time.Duration
	Text       string
}

// ParseFormat validates a format name; txt is an alias of text.
func ParseFormat(s string) (string, error) {
	f := strings.ToLower(strings.TrimSpace(s))
	switch f {
	case "":
		return "json", nil
	case "txt":
		return "text", nil
	case "json", "text", "srt", "vtt", "verbose_json":
		return f, nil
	}
	return "", fmt.Errorf("%w %q: want one of %s", ErrFormat, s, strings.Join(Formats, ", "))
}

// Render writes t in format and returns the content type to answer with.
// json and verbose_json are application/json; text, srt and vtt are
// text/plain, as OpenAI's API answers them.
func Render(format string, t Transcript) (contentType string, body []byte, err error) {
	f, err := ParseFormat(format)
	if err != nil {
		return "", nil, err
	}
	const plain = "text/plain; charset=utf-8"
	switch f {
	case "text":
		return plain, []byte(strings.TrimSpace(t.Text) + "\n"), nil
	case "srt":
		return plain, []byte(SRT(t)), nil
	case "vtt":
		return plain, []byte(VTT(t)), nil
	case "verbose_json":
		body, err = json.Marshal(verbose(t))
	default:
		body, err = json.Marshal(struct {
			Text string `json:"text"`
		}{strings.TrimSpace(t.Text)})
	}
	return "application/json", body, err
}

// stamp formats d as HH:MM:SS<sep>mmm.
func stamp(d time.Duration, sep string) string {
	if d < 0 {
		d = 0
	}
	ms := d.Milliseconds()
	return fmt.Sprintf("%02d:%02d:%02d%s%03d", ms/3600000, ms/60000%60, ms/1000%60, sep, ms%1000)
}

// SRT renders SubRip subtitles, numbered from 1.
func SRT(t Transcript) string {
	var b strings.Builder
	for i, s := range t.Segments {
		fmt.Fprintf(&b, "%d\n%s --> %s\n%s\n\n", i+1, stamp(s.Start, ","), stamp(s.End, ","), strings.TrimSpace(s.Text))
	}
	return b.String()
}

// VTT renders WebVTT subtitles.
func VTT(t Transcript) string {
	var b strings.Builder
	b.WriteString("WEBVTT\n\n")
	for _, s := range t.Segments {
		fmt.Fprintf(&b, "%s --> %s\n%s\n\n", stamp(s.Start, "."), stamp(s.End, "."), strings.TrimSpace(s.Text))
	}
	return b.String()
}

type verboseSegment struct {
	ID               int     `json:"id"`
	Seek             int     `json:"seek"`
	Start            float64 `json:"start"`
	End              float64 `json:"end"`
	Text             string  `json:"text"`
	Tokens           []int   `json:"tokens"`
	Temperature      float64 `json:"temperature"`
	AvgLogprob       float64 `json:"avg_logprob"`
	CompressionRatio float64 `json:"compression_ratio"`
	NoSpeechProb     float64 `json:"no_speech_prob"`
}

type verboseJSON struct {
	Task     string           `json:"task"`
	Language string           `json:"language"`
	Duration float64          `json:"duration"`
	Text     string           `json:"text"`
	Segments []verboseSegment `json:"segments"`
}

func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

// verbose is OpenAI's verbose_json: the language by name, times in seconds,
// and per segment the fields OpenAI clients expect (those a backend does not
// report are zero; seek is the segment's start in 10 ms frames).
func verbose(t Transcript) verboseJSON {
	task := t.Task
	if task == "" {
		task = "transcribe"
	}
	v := verboseJSON{Task: task, Language: LanguageName(t.Language), Duration: seconds(t.Duration), Text: strings.TrimSpace(t.Text), Segments: []verboseSegment{}}
	for i, s := range t.Segments {
		v.Segments = append(v.Segments, verboseSegment{
			ID: i, Seek: int(s.Start / (10 * time.Millisecond)), Start: seconds(s.Start), End: seconds(s.End),
			Text: s.Text, Tokens: []int{},
		})
	}
	return v
}

type segmentJSON struct {
	ID    int     `json:"id"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Text  string  `json:"text"`
}

func fromSeconds(s float64) time.Duration {
	return time.Duration(math.Round(s*1000)) * time.Millisecond
}

// MarshalJSON writes times in seconds (millisecond precision).
func (s Segment) MarshalJSON() ([]byte, error) {
	return json.Marshal(segmentJSON{ID: s.ID, Start: seconds(s.Start), End: seconds(s.End), Text: s.Text})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Segment) UnmarshalJSON(b []byte) error {
	var v segmentJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Segment{ID: v.ID, Start: fromSeconds(v.Start), End: fromSeconds(v.End), Text: v.Text}
	return nil
}

type transcriptJSON struct {
	Task     string    `json:"task,omitempty"`
	Language string    `json:"language"`
	Duration float64   `json:"duration"`
	Text     string    `json:"text"`
	Segments []Segment `json:"segments"`
}

// MarshalJSON writes the transcript with times in seconds.
func (t Transcript) MarshalJSON() ([]byte, error) {
	segs := t.Segments
	if segs == nil {
		segs = []Segment{}
	}
	return json.Marshal(transcriptJSON{Task: t.Task, Language: t.Language, Duration: seconds(t.Duration), Text: t.Text, Segments: segs})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (t *Transcript) UnmarshalJSON(b []byte) error {
	var v transcriptJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = Transcript{Task: v.Task, Language: v.Language, Duration: fromSeconds(v.Duration), Text: v.Text, Segments: v.Segments}
	return nil
}
