//go:build whisper

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/daemontest"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/jobs/audiocut"
	"github.com/wsched/wsched/placement/inventory"
)

// TestChunkedLongFile runs a long file — jfk.wav twelve times, 2 m 12 s —
// through a daemon with [jobs] chunk_over 1m and the real backend on the
// weightless tiny.en: the job runs as five chunks (30 s windows) and
// completes with every segment inside the file and in order.
func TestChunkedLongFile(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	models := filepath.Join(dir, "models")
	_ = os.MkdirAll(models, 0o755)
	data, err := os.ReadFile(sharedFile(t, "models/whisper-empty/for-tests-ggml-tiny.en.bin"))
	if err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(models, "ggml-tiny.en.bin"), data, 0o644)
	long := filepath.Join(dir, "long.wav")
	secs := concatWAV(t, sharedFile(t, "audio/jfk.wav"), long, 12)

	cfg := config.Defaults()
	cfg.Daemon.Socket, cfg.Daemon.StateDir = filepath.Join(dir, "wsched.sock"), filepath.Join(dir, "state")
	cfg.Inventory.Provider = inventory.ProviderSim
	cfg.Inventory.Sim = []inventory.SimGPU{{Name: "Sim GPU", Memory: units.Bytes(24 * units.GiB)}, {Name: "Sim GPU", Memory: units.Bytes(24 * units.GiB)}}
	cfg.Backends.PluginDir, cfg.Backends.DevDirs, cfg.Models.Dir = filepath.Dir(bin), nil, models
	cfg.Jobs.ChunkOver = units.Duration(time.Minute)
	c := daemontest.Run(t, cfg)

	j := daemontest.JobStates(t, c, api.JobRequest{AudioPath: long, Model: "tiny.en"}, "pending loading processing completed")
	if j.Chunks == nil || j.Chunks.Total != 5 || j.Chunks.Done != 5 || j.Result == nil {
		t.Fatalf("job: chunks %+v, result %v, error %q", j.Chunks, j.Result != nil, j.Error)
	}
	end := time.Duration(secs * float64(time.Second))
	var last time.Duration
	for _, s := range j.Result.Segments {
		if s.Start < last || s.End < s.Start || s.End > end+time.Second {
			t.Errorf("segment %d at %s–%s after %s (file %s)", s.ID, s.Start, s.End, last, end)
		}
		last = s.Start
	}
	if d := j.Result.Duration; d < end-time.Second || d > end+time.Second {
		t.Errorf("duration %s, want %s", d, end)
	}
	t.Logf("%.1f s of audio in %d chunks: %d segments, last at %s", secs, j.Chunks.Total, len(j.Result.Segments), last)
}

// concatWAV writes src's samples n times into dst and returns its seconds.
func concatWAV(t *testing.T, src, dst string, n int) float64 {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := audiocut.ParseWAV(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	pcm := b[f.DataOffset : f.DataOffset+f.DataBytes]
	samples := make([]int16, 0, n*len(pcm)/2)
	for range n {
		for i := 0; i+1 < len(pcm); i += 2 {
			samples = append(samples, int16(uint16(pcm[i])|uint16(pcm[i+1])<<8))
		}
	}
	var out bytes.Buffer
	if err := audiocut.WriteWAV(&out, f, samples); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return float64(len(samples)/f.Channels) / float64(f.Rate)
}
