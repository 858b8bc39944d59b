package jobs

import (
	"context"
	"fmt"
	"testing"

	"github.com/wsched/wsched/placement"
)

func TestWatchSeesEveryJobAndOutcome(t *testing.T) {
	r := startManager(t, Config{MaxRetries: 1}, &fakeExec{}, nil)
	ctx := context.Background()
	events, stop, err := r.m.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	r.exec.on("oom-once", fail(fmt.Errorf("CUDA: %w", ErrOutOfMemory)))
	r.exec.on("bad", fail(fmt.Errorf("decode audio: %w", ErrBadInput)))
	for _, model := range []string{"oom-once", "bad"} {
		j, err := r.m.Submit(ctx, spec(model, placement.Normal))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.m.Wait(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
	}
	r.stop()
	outcomes := map[string][]string{}
	for ev := range events { // closed by the shutdown
		if ev.Type == EventSegment || ev.Job.Result != nil && (ev.Job.Result.Text != "" || ev.Job.Result.Segments != nil) {
			t.Errorf("watcher got %s event with result %+v; want no segments, results without text", ev.Type, ev.Job.Result)
		}
		if ev.Outcome != "" {
			outcomes[ev.Job.Spec.Model] = append(outcomes[ev.Job.Spec.Model], ev.Outcome)
		}
	}
	want := map[string][]string{"oom-once": {OutcomeOOMRetried, OutcomeCompleted}, "bad": {OutcomeFailed}}
	if fmt.Sprint(outcomes) != fmt.Sprint(want) {
		t.Errorf("outcomes %v, want %v", outcomes, want)
	}
}
