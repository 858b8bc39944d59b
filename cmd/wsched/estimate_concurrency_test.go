package main

import (
	"strings"
	"testing"
)

// TestEstimateConcurrency: --concurrency N gives the total for N streams in
// one instance (--json: streams with the shared and per-stream parts), and
// --explain prints both parts.
func TestEstimateConcurrency(t *testing.T) {
	one := estimateJSON(t, "--model", "large-v3", "--no-daemon")
	ten := estimateJSON(t, "--model", "large-v3", "--no-daemon", "--concurrency", "10")
	s := ten.Streams
	if s == nil || s.Concurrency != 10 || one.Streams == nil {
		t.Fatalf("streams %+v", s)
	}
	if ten.TotalBytes != one.TotalBytes+9*s.PerStreamBytes || s.SharedBytes+10*s.PerStreamBytes != ten.TotalBytes {
		t.Errorf("ten streams %d, one %d, per stream %d", ten.TotalBytes, one.TotalBytes, s.PerStreamBytes)
	}
	out, _, err := runCLI(t, nil, "estimate", "--config", seedSim, "--no-daemon", "--model", "tiny", "--concurrency", "4", "--explain")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nshared ", "\nper stream ", "4 in one instance", "streams: shared once per instance"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := runCLI(t, nil, "estimate", "--config", seedSim, "--no-daemon", "--model", "tiny", "--concurrency", "2000"); err == nil {
		t.Error("--concurrency 2000 accepted")
	}
}
