package jobs

import (
	"context"
	"strings"
	"testing"

	"github.com/wsched/wsched/jobs/transcript"
)

// TestShortReserve: two slots, one kept for short jobs. A long file runs;
// a second long file waits although a slot is free, and a clip that arrived
// after it takes the slot; without the reserve the second file goes first
// (shortest first is not enough: both files are queued before the clip).
func TestShortReserve(t *testing.T) {
	for _, tt := range []struct {
		reserve int
		want    string
	}{
		{1, "/long-a.wav /clip.wav /long-b.wav"},
		{0, "/long-a.wav /long-b.wav /clip.wav"},
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
		r := &mrig{m: New(Config{MaxActive: 2, Probe: probe}, exec, &memJobs{jobs: map[string]Job{}}, nil), done: make(chan struct{})}
		r.m.SetShortReserve(tt.reserve, 0)
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		go func() { _ = r.m.Run(ctx); close(r.done) }()
		wctx := waitCtx(t)
		a, _ := r.m.Submit(wctx, Spec{AudioPath: "/long-a.wav", Model: "tiny"})
		waitFor(t, "the first file", func() bool { return len(exec.started()) == 1 })
		b, _ := r.m.Submit(wctx, Spec{AudioPath: "/long-b.wav", Model: "tiny"})
		if tt.reserve == 0 {
			waitFor(t, "the second file", func() bool { return len(exec.started()) == 2 })
		}
		c, _ := r.m.Submit(wctx, Spec{AudioPath: "/clip.wav", Model: "tiny"})
		waitFor(t, "two running", func() bool { return len(exec.started()) == 2 })
		close(gate)
		for _, id := range []string{a.ID, b.ID, c.ID} {
			if j, err := r.m.Wait(wctx, id); err != nil || j.State != Completed {
				t.Fatalf("reserve %d: job %s %s (%v)", tt.reserve, id, j.State, err)
			}
		}
		if got := strings.Join(exec.started(), " "); got != tt.want {
			t.Errorf("reserve %d: start order %s, want %s", tt.reserve, got, tt.want)
		}
		r.stop()
	}
}
