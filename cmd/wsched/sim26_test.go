package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/jobs/audiocut"
)

// writeSilence writes secs seconds of 16 kHz mono silence as WAV.
func writeSilence(t *testing.T, path string, secs int) {
	t.Helper()
	var b bytes.Buffer
	if err := audiocut.WriteWAV(&b, audiocut.Format{Rate: 16000, Channels: 1}, make([]int16, 16000*secs)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTraceRoundTrip runs jobs through a real daemon, exports its trace
// (`wsched jobs --trace`) and simulates it (`wsched sim --trace`): the
// trace has every job with its audio length, priority and uid, and the
// lease events of their backends; the simulation runs every job per policy.
func TestTraceRoundTrip(t *testing.T) {
	e := newE2E(t)
	e.withFakeBackend(t)
	e.serve()
	c := e.client()
	defer c.Close()
	ctx := context.Background()
	lengths := map[string]int{}
	for i, secs := range []int{2, 5, 9, 40} {
		audio := filepath.Join(e.dir, fmt.Sprintf("a%d.wav", i))
		writeSilence(t, audio, secs)
		prio := "normal"
		if i == 1 {
			prio = "high"
		}
		j, err := c.SubmitJob(ctx, api.JobRequest{AudioPath: audio, Priority: prio})
		if err != nil {
			t.Fatal(err)
		}
		lengths[j.ID] = secs
	}
	for id := range lengths {
		for i := 0; ; i++ {
			j, err := c.Job(ctx, id)
			if err == nil && j.State.Finished() {
				if j.State != api.JobCompleted {
					t.Fatalf("job %s: %s %s", id, j.State, j.Error)
				}
				break
			}
			if i > 2000 {
				t.Fatalf("job %s never finished", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	out, err := e.wsched("jobs", "--trace").Output()
	if err != nil {
		t.Fatalf("wsched jobs --trace: %v", err)
	}
	trace := filepath.Join(e.dir, "trace.jsonl")
	_ = os.WriteFile(trace, out, 0o644)
	var header api.TraceHeader
	var jobsSeen, granted int
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var kind struct{ Kind string }
		_ = json.Unmarshal([]byte(line), &kind)
		switch {
		case i == 0:
			if err := json.Unmarshal([]byte(line), &header); err != nil || header.Kind != "trace" || header.Jobs != 4 {
				t.Errorf("header %q (%v)", line, err)
			}
		case kind.Kind == "job":
			var j api.TraceJob
			_ = json.Unmarshal([]byte(line), &j)
			if secs, ok := lengths[j.ID]; !ok || j.AudioSeconds != float64(secs) || j.Model != "fake-tiny" || j.State != "completed" || j.Arrival < 0 {
				t.Errorf("job line %s: want %d s of fake-tiny, completed", line, secs)
			}
			if (j.Priority == "high") != (lengths[j.ID] == 5) || j.UID != os.Getuid() {
				t.Errorf("job line %s: priority or uid wrong", line)
			}
			jobsSeen++
		case kind.Kind == "lease":
			var l api.TraceLease
			_ = json.Unmarshal([]byte(line), &l)
			if l.Event == "granted" && strings.HasPrefix(l.Job, "job-") && l.Bytes > 0 {
				granted++
			}
		default:
			t.Errorf("line %d: %q", i, line)
		}
	}
	if jobsSeen != 4 || granted == 0 || header.LeaseEvents == 0 {
		t.Errorf("%d job lines, %d grants to jobs, header %+v:\n%s", jobsSeen, granted, header, out)
	}

	simOut, err := e.wsched("sim", "--trace", trace, "--gpus", "1", "--json").Output()
	if err != nil {
		t.Fatalf("wsched sim --trace: %v", err)
	}
	var policies []string
	for _, line := range strings.Split(strings.TrimSpace(string(simOut)), "\n") {
		var r struct {
			Policy string `json:"policy"`
			Jobs   int    `json:"jobs"`
			OOM    int    `json:"oom"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Jobs != 4 || r.OOM != 0 {
			t.Errorf("sim result %q (%v): want 4 jobs, no OOM", line, err)
		}
		policies = append(policies, r.Policy)
	}
	if len(policies) != 3 {
		t.Errorf("policies %v", policies)
	}
	table, err := e.wsched("sim", "--trace", trace, "--gpus", "1").Output()
	if err != nil || !strings.Contains(string(table), "trace: "+trace+", 4 jobs") {
		t.Errorf("sim table (%v):\n%s", err, table)
	}
}
