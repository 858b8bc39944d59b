package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/jobs/audiocut"
	"github.com/wsched/wsched/plugins/plugintest"
)

// writeTone writes secs seconds of a 16 kHz mono 440 Hz tone as WAV,
// silent in the pauses (from, to seconds).
func writeTone(t *testing.T, path string, secs int, pauses ...[2]float64) {
	t.Helper()
	samples := make([]int16, 16000*secs)
	for i := range samples {
		samples[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/16000))
		for _, p := range pauses {
			if at := float64(i) / 16000; at >= p[0] && at < p[1] {
				samples[i] = 0
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := audiocut.WriteWAV(f, audiocut.Format{Rate: 16000, Channels: 1}, samples); err != nil {
		t.Fatal(err)
	}
}

// chunkDaemon serves two 24 GiB GPUs, the fake backend and "fake-tiny"
// with 14 GiB leases (one instance per GPU), [jobs] chunk_over 1m; mods
// adjust the config.
func chunkDaemon(t *testing.T, mods ...func(*config.Config)) (*testDaemon, string) {
	t.Helper()
	plugins := fakeBackendDir(t)
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	model := filepath.Join(dir, "fake-tiny.bin")
	_ = os.WriteFile(model, []byte("model"), 0o644)
	audio := filepath.Join(dir, "long.wav")
	writeTone(t, audio, 100)
	_ = os.Chmod(audio, 0o644)
	td := startDaemon(t, 2, 24*GiB, func(c *config.Config) {
		c.Backends.PluginDir, c.Backends.DevDirs = plugins, nil
		c.Models.Dir = filepath.Join(dir, "models")
		c.Models.Entries = []config.Model{{Name: "fake-tiny", Backend: "fake", Path: model, Memory: units.Bytes(14 * GiB)}}
		c.Models.Default = "fake-tiny"
		c.Jobs.ChunkOver = units.Duration(time.Minute)
		for _, mod := range mods {
			mod(c)
		}
	})
	return td, audio
}

// TestLongJobRunsAsChunksAcrossGPUs: a 100 s file over chunk_over runs as
// four 30 s chunks, at the same time on both GPUs; /v1/jobs counts the
// chunks; the result has 12 segments at the file's timestamps; the chunk
// files are gone afterwards.
func TestLongJobRunsAsChunksAcrossGPUs(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.SegmentDelay), "150ms")
	td, audio := chunkDaemon(t)
	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	gpus := map[int]bool{}
	var sawChunks bool
	got := td.waitJob(t, j.ID, func(cur jobs.Job) bool {
		leases, err := td.c.Leases(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		busy := map[int]bool{}
		for _, l := range leases {
			if strings.HasPrefix(l.Labels["wsched.job"], j.ID+".c") && l.GPUIndex >= 0 {
				busy[l.GPUIndex] = true
			}
		}
		if len(busy) == 2 {
			gpus = busy
		}
		if _, out := td.raw("GET", "/v1/jobs", ""); strings.Contains(out, `"chunks":{"total":4`) {
			sawChunks = true
		}
		return cur.State.Finished()
	})
	if got.State != jobs.Completed || got.Result == nil {
		t.Fatalf("job %s: %+v", got.State, got)
	}
	var starts []string
	for _, s := range got.Result.Segments {
		starts = append(starts, fmt.Sprint(s.Start.Seconds()))
	}
	if want := "0 1 2 30 31 32 60 61 62 90 91 92"; strings.Join(starts, " ") != want {
		t.Errorf("segment starts %v, want %s", starts, want)
	}
	if got.Chunks == nil || got.Chunks.Total != 4 || got.Chunks.Done != 4 || got.Progress != 100 || got.Result.Duration != 100*time.Second {
		t.Errorf("chunks %+v, progress %v, duration %s", got.Chunks, got.Progress, got.Result.Duration)
	}
	if !gpus[0] || !gpus[1] {
		t.Errorf("chunks never ran on both GPUs at once (saw %v)", gpus)
	}
	if !sawChunks {
		t.Error(`/v1/jobs never showed "chunks" with total 4`)
	}
	chunkDir := filepath.Join(td.cfg.Daemon.StateDir, "uploads", "chunks", j.ID)
	if _, err := os.Stat(chunkDir); !os.IsNotExist(err) {
		t.Errorf("chunk files left in %s (%v)", chunkDir, err)
	}
	var raw map[string]any
	_, out := td.raw("GET", "/v1/jobs/"+j.ID, "")
	if err := json.Unmarshal([]byte(out), &raw); err != nil || raw["chunks"] == nil {
		t.Errorf("GET /v1/jobs/ID has no chunks: %v %s", err, out)
	}
}

// TestCancelLongJobReleasesChunks: cancelling a chunked job while its
// chunks run (two placed, two waiting for memory) ends it as cancelled and
// releases or withdraws every chunk's lease.
func TestCancelLongJobReleasesChunks(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.Block), "transcribe")
	td, audio := chunkDaemon(t)
	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	td.waitJob(t, j.ID, func(jobs.Job) bool { return chunkLeases(t, td, j.ID, true) == 2 }) // one per GPU; two wait for memory
	if status, out := td.raw("DELETE", "/v1/jobs/"+j.ID, ""); status != 200 {
		t.Fatalf("cancel: %d %s", status, out)
	}
	got := td.waitJob(t, j.ID, finished)
	if got.State != jobs.Cancelled || got.Chunks.Done != 0 {
		t.Errorf("job %s, chunks %+v", got.State, got.Chunks)
	}
	for i := 0; ; i++ {
		n := chunkLeases(t, td, j.ID, false)
		if n == 0 {
			break
		}
		if i > 1000 {
			t.Fatalf("%d chunk leases still held after the cancel", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// chunkLeases counts the leases of the chunks of job id, the granted ones
// only or the queued ones too.
func chunkLeases(t *testing.T, td *testDaemon, id string, granted bool) int {
	t.Helper()
	leases, err := td.c.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range leases {
		if strings.HasPrefix(l.Labels["wsched.job"], id+".c") && (l.GPUIndex >= 0 || !granted) {
			n++
		}
	}
	return n
}

// TestLongJobYieldsToHigherPriority: a high-priority job submitted while a
// low-priority long job's first chunks run completes before the long job's
// last chunk: the chunks still queued wait behind it.
func TestLongJobYieldsToHigherPriority(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.SegmentDelay), "300ms")
	td, audio := chunkDaemon(t)
	long := td.submit(t, fmt.Sprintf(`{"audio_path": %q, "priority": "low"}`, audio))
	td.waitJob(t, long.ID, func(jobs.Job) bool { return chunkLeases(t, td, long.ID, true) == 2 })
	clip := filepath.Join(filepath.Dir(audio), "clip.wav")
	writeTone(t, clip, 5)
	_ = os.Chmod(clip, 0o644)
	high := td.submit(t, fmt.Sprintf(`{"audio_path": %q, "priority": "high"}`, clip))
	h := td.waitJob(t, high.ID, finished)
	l := td.job(t, long.ID)
	if h.State != jobs.Completed || l.State.Finished() || l.Chunks == nil || l.Chunks.Done >= 4 {
		t.Errorf("when the high-priority job ended (%s) the long job was %s with chunks %+v: want it still running", h.State, l.State, l.Chunks)
	}
	if l = td.waitJob(t, long.ID, finished); l.State != jobs.Completed || len(l.Result.Segments) != 12 {
		t.Errorf("long job %s, result %+v", l.State, l.Result)
	}
}

// TestLongJobCutAtPausesWithVAD: with VAD on for the job the windows end in
// the file's pauses (before each 30 s mark), not at 30 s.
func TestLongJobCutAtPausesWithVAD(t *testing.T) {
	td, long := chunkDaemon(t, func(c *config.Config) { c.Models.Entries[0].VADModel = "/srv/models/ggml-silero-v5.1.2.bin" })
	audio := filepath.Join(filepath.Dir(long), "paused.wav")
	pauses := [][2]float64{{26, 26.5}, {50, 50.5}}
	writeTone(t, audio, 80, pauses...)
	_ = os.Chmod(audio, 0o644)
	j := td.waitJob(t, td.submit(t, fmt.Sprintf(`{"audio_path": %q, "vad": true}`, audio)).ID, finished)
	if j.State != jobs.Completed || j.Chunks == nil || j.Chunks.Total != 3 || len(j.Result.Segments) != 9 {
		t.Fatalf("job %s (%s), chunks %+v", j.State, j.Error, j.Chunks)
	}
	for i, p := range pauses { // each window's first segment starts at its window's start
		start := j.Result.Segments[3*(i+1)].Start.Seconds()
		if start < p[0] || start > p[1] {
			t.Errorf("window %d starts at %.2f s, want in the pause %v", i+1, start, p)
		}
	}
}
