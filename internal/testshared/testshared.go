// Package testshared is test support used across packages: fixtures in the
// shared/ directory beside the repository (whisper.cpp's weightless models,
// jfk.wav; CI checks the repository out with ../shared next to it), a
// buffer for concurrent writers, a writer and a logger into the test log,
// and waiting for a daemon or backend to answer its health check.
package testshared

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// File returns the path of shared/NAME, found by walking up from the
// working directory, or skips the test when there is none.
func File(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "shared", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skipf("shared/%s not found above %s: skipping", name, dir)
		}
		dir = parent
	}
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (log output of
// subprocesses and their goroutines, read by the test).
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Reset empties the buffer.
func (b *SyncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// LogWriter returns a writer that logs each write as one line of t's log
// (a logger's output, a subprocess's stderr).
func LogWriter(t testing.TB) io.Writer { return logWriter{t} }

// Logger returns a logger that writes every record, debug ones included,
// into t's log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(LogWriter(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// WaitHealthy polls h.Health until it answers or 10 s pass (then the test
// fails): a daemon or backend that was just started.
func WaitHealthy(t testing.TB, h interface{ Health(context.Context) error }) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := h.Health(context.Background())
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not healthy within 10s: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Touch creates an empty file NAME in a fresh test directory and returns
// its path (a model file a fake backend "loads").
func Touch(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// WaitFor polls cond every 5 ms until it holds, failing the test (naming
// what it waited for) after timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
