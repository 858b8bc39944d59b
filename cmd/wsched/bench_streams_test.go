package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/plugins/plugintest"
)

// runBenchStreams runs `wsched bench streams` with args, bounded, and
// returns the table's row for n streams, split into its columns.
func runBenchStreams(t *testing.T, env []string, n string, args ...string) []string {
	t.Helper()
	e := newE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := e.wsched(append([]string{"bench", "streams"}, args...)...)
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	cmd.Env = append(append(os.Environ(), "WSCHED_TEST_AS_MAIN=1", "TMPDIR="+e.tmp), env...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("wsched bench streams: %v\n%s\n%s", err, out.String(), stderr.String())
	}
	t.Logf("wsched bench streams %s:\n%s", strings.Join(args, " "), out.String())
	if strings.Contains(out.String(), "warning:") {
		t.Errorf("jobs failed:\n%s", out.String())
	}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == n {
			return f
		}
	}
	t.Fatalf("no row for %s streams:\n%s", n, out.String())
	return nil
}

// TestBenchStreamsFake (issue 26): the bench runs its jobs through a real
// daemon and backend processes; with max_streams = 4, four concurrent jobs
// use one process whose lease holds four streams (the fake backend has no
// estimator profile: a stream costs the entry's memory); with
// max_streams = 1 they use one process each.
func TestBenchStreamsFake(t *testing.T) {
	bin := plugintest.Build(t)
	model := testshared.Touch(t, "fake.bin")
	jfk := testshared.File(t, "audio/jfk.wav")
	row := runBenchStreams(t, []string{plugintest.EnvVar(plugintest.SegmentDelay, "100ms")}, "4",
		"--backend-dir", filepath.Dir(bin), "--backend", "fake", "--model", model, "--memory", "1GiB",
		"--audio", jfk, "--streams", "1,4", "--rounds", "1")
	// streams, shared s/s, processes, streams/instance, peak lease (2 fields), baseline s/s, processes, peak lease (2), ratio
	if len(row) != 11 || row[2] != "1" || row[7] == "1" {
		t.Errorf("row %q: want one process shared, several at max_streams = 1", row)
	}
	if gib, err := strconv.ParseFloat(row[4], 64); err != nil || row[5] != "GiB" || gib > 4 {
		t.Errorf("shared peak lease %s %s: want at most four streams' 4 GiB", row[4], row[5])
	}
}

// TestBenchStreamsWhisper (issue 26): eight concurrent jobs of a weightless
// whisper.cpp model through the daemon use one backend process with
// max_streams = 8 (the baseline is left out: it only adds minutes). Needs the whisper.cpp backend
// (make plugins: bin/wsched-backend-whisper, or the directory in
// WSCHED_TEST_WHISPER_BACKEND_DIR); skipped without it.
func TestBenchStreamsWhisper(t *testing.T) {
	dir := os.Getenv("WSCHED_TEST_WHISPER_BACKEND_DIR")
	if dir == "" {
		dir, _ = filepath.Abs(filepath.Join(repoRoot, "bin"))
	}
	if _, err := os.Stat(filepath.Join(dir, "wsched-backend-whisper")); err != nil {
		t.Skipf("no wsched-backend-whisper in %s (make plugins builds it)", dir)
	}
	model := testshared.File(t, "models/whisper-empty/for-tests-ggml-tiny.bin")
	jfk := testshared.File(t, "audio/jfk.wav")
	row := runBenchStreams(t, nil, "8", "--backend-dir", dir, "--model", model, "--audio", jfk, "--streams", "8", "--rounds", "1", "--no-baseline")
	if row[2] != "1" || row[3] != "8" {
		t.Errorf("row %q: want one process serving eight streams", row)
	}
}
