package runner

import (
	"errors"
	"fmt"

	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/plugins"
)

// ErrResultTooLarge fails a job whose backend returned more segments or
// text than [jobs] max_segments or max_result_bytes allow. It is not
// retried (the same audio gives the same result) and nothing is truncated.
var ErrResultTooLarge = errors.New("result too large")

// ResultBounds bounds one job's result; 0 means no limit.
type ResultBounds struct {
	// Segments is [jobs] max_segments.
	Segments int
	// Bytes is [jobs] max_result_bytes: the transcript's text and its
	// segments' texts together.
	Bytes int64
}

// resultTally counts a call's segments as they stream in, so that the call
// is stopped at the bound rather than after the backend sent everything.
type resultTally struct {
	b        ResultBounds
	segments int
	bytes    int64
	err      error // the first bound passed
}

func (b ResultBounds) tally() *resultTally { return &resultTally{b: b} }

func (t *resultTally) segment(text string) error {
	t.segments++
	t.bytes += int64(len(text))
	if t.err == nil {
		t.err = t.b.exceeded(t.segments, t.bytes)
	}
	return t.err
}

// check bounds a finished call's result (its text, and segments a backend
// returned without streaming them).
func (b ResultBounds) check(res plugins.Result) error {
	n := int64(len(res.Text))
	for _, s := range res.Segments {
		n += int64(len(s.Text))
	}
	return b.exceeded(len(res.Segments), n)
}

func (b ResultBounds) exceeded(segments int, bytes int64) error {
	switch {
	case b.Segments > 0 && segments > b.Segments:
		return fmt.Errorf("%w: the backend returned more than %d segments ([jobs] max_segments); split the audio or raise the limit",
			ErrResultTooLarge, b.Segments)
	case b.Bytes > 0 && bytes > b.Bytes:
		return fmt.Errorf("%w: the backend returned more than %s of text ([jobs] max_result_bytes); split the audio or raise the limit",
			ErrResultTooLarge, units.FormatBytes(b.Bytes))
	}
	return nil
}
