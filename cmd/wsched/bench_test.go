package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBenchLease runs a small `wsched bench lease` at scale: its own daemon
// and echo server processes, a loaded daemon, interleaved rounds.
func TestBenchLease(t *testing.T) {
	e := newE2E(t)
	cmd := e.wsched("bench", "lease", "-c", "2", "-n", "20", "--rounds", "5", "--leases", "20", "--waiters", "5", "--gpus", "2", "--dispatch", "--idle", "100ms", "--restart")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench lease: %v\n%s\n%s", err, out.String(), errb.String())
	}
	for _, want := range []string{"5 rounds of 4 cycles", "loaded with 20 live leases and 5 waiting requests", "grant+release (wsched)", "bare HTTP echo (floor)", "over 5 rounds: min ", "dispatch (release → grant of a waiter), 2 pairs", "daemon CPU while idle", "start-up after kill -9 with 20 leases restored"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := e.wsched("bench", "lease", "--rounds", "3").Run(); err == nil {
		t.Error("--rounds 3 accepted; want at least 5")
	}
}
