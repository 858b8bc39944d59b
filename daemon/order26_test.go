package daemon

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/plugins/plugintest"
)

// pcmWAV is a mono 16 kHz 16-bit WAV of secs seconds of silence.
func pcmWAV(secs float64) []byte {
	const rate, bytesPerSec = 16000, 32000
	n := uint32(secs * bytesPerSec)
	b := make([]byte, 0, 44+n)
	b = append(b, "RIFF"...)
	b = binary.LittleEndian.AppendUint32(b, 36+n)
	b = append(b, "WAVEfmt "...)
	b = binary.LittleEndian.AppendUint32(b, 16)
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint32(b, rate)
	b = binary.LittleEndian.AppendUint32(b, bytesPerSec)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 16)
	b = append(b, "data"...)
	b = binary.LittleEndian.AppendUint32(b, n)
	return append(b, make([]byte, n)...)
}

// TestJobsShowExpectedStart: through the daemon, a job's audio duration is
// read at admission and /v1/jobs shows audio_seconds, expected_seconds and,
// for a queued job, expected_start (issue 26).
func TestJobsShowExpectedStart(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.SegmentDelay), "400ms") // the first job runs ≥ 1.2 s: the second stays queued while listed
	td, _ := jobDaemon(t, 4*GiB, func(c *config.Config) { c.Jobs.MaxActive = 1 })
	dir := t.TempDir()
	long, short := filepath.Join(dir, "long.wav"), filepath.Join(dir, "short.wav")
	if err := os.WriteFile(long, pcmWAV(30), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, pcmWAV(3), 0o644); err != nil {
		t.Fatal(err)
	}
	first := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, long))
	queued := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, short))
	if first.AudioSeconds != 30 || queued.AudioSeconds != 3 || !(queued.ExpectedSeconds > 0) || !(first.ExpectedSeconds > queued.ExpectedSeconds) {
		t.Errorf("admitted: %v s (expected %v s), %v s (expected %v s)", first.AudioSeconds, first.ExpectedSeconds, queued.AudioSeconds, queued.ExpectedSeconds)
	}
	status, body := td.raw("GET", "/v1/jobs", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/jobs: %d %s", status, body)
	}
	var list struct {
		Jobs []map[string]any `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	for _, j := range list.Jobs {
		if _, ok := j["audio_seconds"]; !ok {
			t.Errorf("job without audio_seconds: %v", j)
		}
		if _, ok := j["expected_seconds"]; !ok {
			t.Errorf("job without expected_seconds: %v", j)
		}
		if _, ok := j["expected_start"]; ok != (j["id"] == queued.ID && j["state"] == "pending") {
			t.Errorf("expected_start on %v (state %v)", j["id"], j["state"])
		}
	}
	td.waitJob(t, first.ID, finished)
	td.waitJob(t, queued.ID, finished)
}
