// Package testshared finds test fixtures in the shared/ directory beside
// the repository (whisper.cpp's weightless models, jfk.wav): CI checks the
// repository out with ../shared next to it.
package testshared

import (
	"os"
	"path/filepath"
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
