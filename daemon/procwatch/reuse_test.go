package procwatch

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runPolling runs a watcher that polls, as it does without pidfd.
func runPolling(t *testing.T) *Watcher {
	t.Helper()
	w := newWatcher(slog.New(slog.DiscardHandler))
	w.polling = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// restart rewrites the start time in dir/stat: the PID now names another
// process, as after an exit and a PID reuse between two checks.
func restart(t *testing.T, dir string) {
	t.Helper()
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	f[19] += "1" // starttime, field 22
	s = s[:i+1] + " " + strings.Join(f, " ") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPollingSeesReusedPID: without pidfd, a watched PID that names another
// process at the next poll (its start time differs) is reported as exited:
// the new process does not inherit the old one's leases.
func TestPollingSeesReusedPID(t *testing.T) {
	w := runPolling(t)
	c := startSleep(t)
	pid := c.Process.Pid
	root, dir := fakeProc(t, pid)
	info, err := w.Lookup(root, pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WatchProcess(root, pid, info.StartTicks); err != nil {
		t.Fatal(err)
	}
	restart(t, dir)
	select {
	case got := <-w.Exited():
		if got != pid {
			t.Errorf("exit of %d reported; want %d", got, pid)
		}
	case <-time.After(40 * PollInterval):
		t.Fatalf("pid %d now names another process (start time changed): no exit reported", pid)
	}
}
