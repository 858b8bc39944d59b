package procwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/wsched/wsched/internal/testtmp"
)

// fakeProc copies pid's stat into a /proc-like tree under a temp dir, so a
// test can take it away and see whether it is read again.
func fakeProc(t *testing.T, pid int) (root, dir string) {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	root = testtmp.ShortDir(t)
	dir = filepath.Join(root, fmt.Sprint(pid))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), stat, 0o644); err != nil {
		t.Fatal(err)
	}
	return root, dir
}

func runWatcher(t *testing.T) *Watcher {
	t.Helper()
	w, err := NewWatcher(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if w.polling {
		t.Skip("no pidfd on this kernel: lookups read /proc each time")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// TestLookupReadsProcOnce: the second lookup of a live process answers from
// the cache taken when its pidfd was opened; /proc is not read again.
func TestLookupReadsProcOnce(t *testing.T) {
	w := runWatcher(t)
	c := startSleep(t)
	pid := c.Process.Pid
	root, dir := fakeProc(t, pid)
	first, err := w.Lookup(root, pid)
	if err != nil {
		t.Fatal(err)
	}
	if first.StartTicks == 0 || first.Name != "sleep" {
		t.Fatalf("lookup = %+v", first)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	again, err := w.Lookup(root, pid)
	if err != nil {
		t.Fatalf("second lookup read /proc again: %v", err)
	}
	if again != first {
		t.Errorf("cached %+v, first %+v", again, first)
	}
	if err := w.WatchProcess(root, pid, first.StartTicks); err != nil {
		t.Fatal(err)
	}
	if err := w.WatchProcess(root, pid, first.StartTicks+1); err != nil {
		t.Fatal(err)
	}
	if got := <-w.Exited(); got != pid {
		t.Errorf("a different start time must count as exited: got %d, want %d", got, pid)
	}
}

// TestLookupAfterExit: once the process exits the cache is not trusted,
// even before the exit is reported.
func TestLookupAfterExit(t *testing.T) {
	w := runWatcher(t)
	c := startSleep(t)
	pid := c.Process.Pid
	root, _ := fakeProc(t, pid)
	if _, err := w.Lookup(root, pid); err != nil {
		t.Fatal(err)
	}
	_ = c.Process.Kill()
	_ = c.Wait()
	if _, err := w.Lookup(root, pid); !errors.Is(err, ErrNoProcess) {
		t.Errorf("lookup of an exited process: %v, want ErrNoProcess", err)
	}
	if _, err := w.Lookup(root, 0); !errors.Is(err, ErrNoProcess) {
		t.Errorf("pid 0: %v", err)
	}
}
