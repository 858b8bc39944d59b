package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimJSON: `wsched sim --json --policy wsched` prints one object with
// the promised keys; the same --seed prints the same bytes.
func TestSimJSON(t *testing.T) {
	args := []string{"sim", "--json", "--policy", "wsched", "--jobs", "400", "--seed", "5"}
	out, _, err := runCLI(t, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if dec.More() {
		t.Errorf("more than one object:\n%s", out)
	}
	for _, k := range []string{"policy", "jobs", "short_p95_wait_seconds", "long_p95_completion_seconds", "makespan_seconds", "oom", "streams_per_gpu_mean", "stranded_bytes_mean"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in %s", k, out)
		}
	}
	if m["policy"] != "wsched" || m["jobs"] != float64(400) {
		t.Errorf("policy %v jobs %v", m["policy"], m["jobs"])
	}
	again, _, err := runCLI(t, nil, args...)
	if err != nil || again != out {
		t.Errorf("same seed, different output (%v):\n%s\n%s", err, out, again)
	}
}

// TestSimTable: the default run prints every policy and the ratio line; a
// workload file is read; a bad policy is refused.
func TestSimTable(t *testing.T) {
	out, _, err := runCLI(t, nil, "sim", "--jobs", "600")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fifo", "wsched", "process-per-job", "short p95 wait", "wsched vs fifo: short-job p95 wait"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	file := filepath.Join(t.TempDir(), "w.jsonl")
	lines := `{"arrival": 0, "audio_seconds": 600, "model": "base"}
{"arrival": 1, "audio_seconds": 5, "model": "base", "priority": "high", "uid": 1001}
`
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(t, nil, "sim", "--workload", file, "--policy", "fifo,wsched", "--gpus", "1")
	if err != nil || !strings.Contains(out, "2 jobs") || strings.Contains(out, "process-per-job") {
		t.Errorf("workload file: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, nil, "sim", "--policy", "lottery"); err == nil {
		t.Error("--policy lottery accepted")
	}
}
