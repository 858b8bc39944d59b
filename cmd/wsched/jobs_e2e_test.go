package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/plugins/plugintest"
)

// withFakeBackend adds the scripted fake backend and a model "fake-tiny" of
// 10 GiB to the e2e config, and returns an audio file.
func (e *e2e) withFakeBackend(t *testing.T) string {
	t.Helper()
	plugins := filepath.Dir(plugintest.Build(t))
	model := filepath.Join(e.dir, "fake-tiny.bin")
	audio := filepath.Join(e.dir, "speech.wav")
	_ = os.WriteFile(model, []byte("model"), 0o644)
	_ = os.WriteFile(audio, []byte("RIFF fake audio"), 0o644)
	extra := fmt.Sprintf(`
[backends]
plugin_dir = %q
dev_dirs = []
default_model = "fake-tiny"
models_dir = %q

[[models.model]]
name = "fake-tiny"
backend = "fake"
path = %q
memory = "10GiB"
`, plugins, filepath.Join(e.dir, "models"), model)
	f, err := os.OpenFile(e.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(extra); err != nil {
		t.Fatal(err)
	}
	return audio
}

func TestTranscribeFiles(t *testing.T) {
	e := newE2E(t)
	audio := e.withFakeBackend(t)
	second := filepath.Join(e.dir, "second.wav")
	_ = os.WriteFile(second, []byte("RIFF"), 0o644)
	e.serve()
	out := filepath.Join(e.dir, "out")
	cmd := e.wsched("transcribe", "--format", "srt", "--output", out, audio, second)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("transcribe: %v\n%s", err, stderr.String())
	}
	for _, name := range []string{"speech.srt", "second.srt"} {
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || !strings.HasPrefix(string(data), "1\n00:00:00,000 --> ") {
			t.Errorf("%s: %q %v", name, data, err)
		}
	}
	for _, want := range []string{"speech.wav: pending", "speech.wav: completed GPU 0 → " + filepath.Join(out, "speech.srt")} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("progress lines lack %q:\n%s", want, stderr.String())
		}
	}
	jobsOut, err := e.wsched("jobs").CombinedOutput()
	if err != nil || strings.Count(string(jobsOut), "completed") != 2 {
		t.Errorf("wsched jobs: %v\n%s", err, jobsOut)
	}
}

// TestDaemonKilledWithQueuedJob: a job waits for memory; the daemon is
// killed -9; after the restart the job resumes and runs.
func TestDaemonKilledWithQueuedJob(t *testing.T) {
	e := newE2E(t)
	audio := e.withFakeBackend(t)
	daemon := e.serve()
	ctx := context.Background()
	c := e.client()
	holder := sleeper(t)
	if _, err := c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 20 * GiB, TTLSeconds: 3600, Holder: &api.HolderRequest{PID: holder.Process.Pid}}); err != nil {
		t.Fatal(err)
	}
	j, err := c.SubmitJob(ctx, api.JobRequest{AudioPath: audio})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ { // queued for memory in the placement engine
		g, _ := c.GPUs(ctx)
		if len(g.Queue) == 1 {
			break
		}
		if i > 500 {
			t.Fatal("job never queued for memory")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Close()
	_ = daemon.Process.Signal(syscall.SIGKILL)
	_ = daemon.Wait()
	_ = holder.Process.Kill() // the memory is free when the daemon comes back
	_ = holder.Wait()

	e.serve()
	c = e.client()
	defer c.Close()
	for i := 0; ; i++ {
		got, err := c.Job(ctx, j.ID)
		if err == nil && got.State.Finished() {
			if got.State != api.JobCompleted {
				t.Fatalf("job after restart: %s %s", got.State, got.Error)
			}
			break
		}
		if i > 1000 {
			t.Fatalf("job did not run after the restart: %+v %v", got, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
