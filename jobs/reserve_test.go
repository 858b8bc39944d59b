package jobs

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/wsched/wsched/jobs/transcript"
)

// TestShortReserve: eight slots, one kept for short jobs. Seven long files
// run; an eighth waits although a slot is free, and a clip that arrived
// after it takes the slot. Without the reserve the eighth file goes first
// (shortest first is not enough: it was queued before the clip arrived).
func TestShortReserve(t *testing.T) {
	for _, tt := range []struct {
		reserve int
		want    string
	}{
		{1, "/clip.wav /long-8.wav"},
		{0, "/long-8.wav /clip.wav"},
	} {
		gate := make(chan struct{})
		exec := &chunkExec{step: func(ctx context.Context, path string, _ int, _ Reporter) (transcript.Transcript, error) {
			select {
			case <-gate:
			case <-ctx.Done():
				return transcript.Transcript{}, ctx.Err()
			}
			return oneSegment(path), nil
		}}
		probe := func(_ context.Context, path string) (float64, error) {
			if strings.Contains(path, "long") {
				return 600, nil
			}
			return 5, nil
		}
		r := &mrig{m: New(Config{MaxActive: 8, Probe: probe}, exec, &memJobs{jobs: map[string]Job{}}, nil), done: make(chan struct{})}
		r.m.SetShortReserve(tt.reserve, 0)
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		go func() { _ = r.m.Run(ctx); close(r.done) }()
		wctx := waitCtx(t)
		var ids []string
		submit := func(path string) {
			j, err := r.m.Submit(wctx, Spec{AudioPath: path, Model: "tiny"})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		for i := 1; i <= 7; i++ {
			submit(fmt.Sprintf("/long-%d.wav", i))
		}
		waitFor(t, "seven files", func() bool { return len(exec.started()) == 7 })
		submit("/long-8.wav")
		if tt.reserve == 0 {
			waitFor(t, "the eighth file", func() bool { return len(exec.started()) == 8 })
		}
		submit("/clip.wav")
		waitFor(t, "eight running", func() bool { return len(exec.started()) == 8 })
		close(gate)
		for _, id := range ids {
			if j, err := r.m.Wait(wctx, id); err != nil || j.State != Completed {
				t.Fatalf("reserve %d: job %s %s (%v)", tt.reserve, id, j.State, err)
			}
		}
		if got := strings.Join(exec.started()[7:], " "); got != tt.want {
			t.Errorf("reserve %d: after the seven files %s, want %s", tt.reserve, got, tt.want)
		}
		r.stop()
	}
	r := New(Config{MaxActive: 7}, &chunkExec{}, nil, nil)
	if r.SetShortReserve(3, 0); r.cfg.ShortReserve != 0 {
		t.Errorf("max_active 7: reserve %d, want none (at most an eighth)", r.cfg.ShortReserve)
	}
}
