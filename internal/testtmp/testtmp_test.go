package testtmp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunFailsOnLeftovers(t *testing.T) {
	var out strings.Builder
	code := run(func() int {
		return writeTemp(t, "left-behind")
	}, &out)
	if code != 1 || !strings.Contains(out.String(), "left-behind") {
		t.Fatalf("code %d, stderr %q; want 1 naming the file", code, out.String())
	}
}

func TestRunPassesWhenClean(t *testing.T) {
	var out strings.Builder
	var seen string
	code := run(func() int {
		seen = os.TempDir()
		d, err := os.MkdirTemp("", "x")
		if err != nil {
			t.Error(err)
			return 1
		}
		os.RemoveAll(d)
		return 0
	}, &out)
	if code != 0 || out.Len() != 0 {
		t.Fatalf("code %d, stderr %q; want 0 and nothing", code, out.String())
	}
	if _, err := os.Stat(seen); !os.IsNotExist(err) {
		t.Errorf("the test TMPDIR %s was not removed: %v", seen, err)
	}
}

func TestRunKeepsFailureCode(t *testing.T) {
	var out strings.Builder
	if code := run(func() int { return 3 }, &out); code != 3 {
		t.Fatalf("code %d, want the tests' own 3", code)
	}
}

func writeTemp(t *testing.T, name string) int {
	if err := os.WriteFile(filepath.Join(os.TempDir(), name), nil, 0o600); err != nil {
		t.Error(err)
		return 1
	}
	return 0
}
