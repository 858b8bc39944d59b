package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/plugins/plugintest"
)

// TestTopShowsExpectedStart: with [jobs] max_active 1 and a job that runs
// until cancelled, a second job waits in the job queue; `wsched top` (a
// snapshot, no terminal) shows when it is expected to start.
func TestTopShowsExpectedStart(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.Block), "transcribe")
	e := newE2E(t)
	audio := e.withFakeBackend(t)
	f, err := os.OpenFile(e.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("\n[jobs]\nmax_active = 1\n")
	f.Close()
	e.serve()
	c := e.client()
	defer c.Close()
	ctx := context.Background()
	if _, err := c.SubmitJob(ctx, api.JobRequest{AudioPath: audio}); err != nil {
		t.Fatal(err)
	}
	queued, err := c.SubmitJob(ctx, api.JobRequest{AudioPath: audio})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		j, err := c.Job(ctx, queued.ID)
		if err == nil && !j.ExpectedStart.IsZero() {
			break
		}
		if i > 1000 {
			t.Fatalf("the queued job never got an expected start: %+v %v", j, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	out, err := e.wsched("top").Output()
	if err != nil {
		t.Fatalf("wsched top: %v\n%s", err, out)
	}
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, queued.ID) {
			line = l
		}
	}
	if !strings.Contains(line, "pending") || !strings.Contains(line, "starts ") {
		t.Errorf("the queued job's row %q shows no expected start:\n%s", line, out)
	}
}
