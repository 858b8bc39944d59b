package runner

import (
	"errors"
	"strings"
	"testing"

	"github.com/wsched/wsched/plugins"
)

func TestResultBounds(t *testing.T) {
	b := ResultBounds{Segments: 3, Bytes: 10}
	tally := b.tally()
	for i := range 3 {
		if err := tally.segment("ab"); err != nil {
			t.Fatalf("segment %d: %v", i, err)
		}
	}
	if err := tally.segment("ab"); !errors.Is(err, ErrResultTooLarge) || !strings.Contains(err.Error(), "[jobs] max_segments") {
		t.Errorf("fourth segment: %v", err)
	}
	long := plugins.Result{Text: "0123456789", Segments: []plugins.Segment{{Text: "x"}}}
	if err := b.check(long); !errors.Is(err, ErrResultTooLarge) || !strings.Contains(err.Error(), "[jobs] max_result_bytes") {
		t.Errorf("11 bytes of text: %v", err)
	}
	if err := (ResultBounds{}).check(long); err != nil {
		t.Errorf("no bounds: %v", err)
	}
}
