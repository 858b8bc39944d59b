// Package testshared finds test fixtures in the shared/ directory beside
// the repository (whisper.cpp's weightless models, jfk.wav): CI checks the
// repository out with ../shared next to it.
package testshared

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
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
