// Package testtmp keeps a test binary's temporary files in a directory of
// its own and fails the run when anything is left there: tests that start
// processes (backends, daemons, ffmpeg) must clean up after them.
package testtmp

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// Main runs m with TMPDIR set to a fresh directory and returns its exit
// code, or 1 when the tests passed but left files there (listed on stderr).
// The directory is removed either way. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testtmp.Main(m)) }
func Main(m *testing.M) int { return Run(m.Run) }

// Run is Main for a TestMain that sets up and tears down state its tests
// share (built binaries): tests runs them and removes that state.
func Run(tests func() int) int { return run(tests, os.Stderr) }

func run(tests func() int, stderr io.Writer) int {
	dir, err := os.MkdirTemp("", "wt") // short: tests make Unix sockets below it
	if err != nil {
		fmt.Fprintln(stderr, "testtmp:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	old, had := os.LookupEnv("TMPDIR")
	os.Setenv("TMPDIR", dir)
	defer func() {
		if had {
			os.Setenv("TMPDIR", old)
		} else {
			os.Unsetenv("TMPDIR")
		}
	}()
	code := tests()
	left, err := Leftovers(dir)
	if err != nil {
		fmt.Fprintln(stderr, "testtmp:", err)
		return 1
	}
	if len(left) > 0 && code == 0 {
		fmt.Fprintf(stderr, "testtmp: the tests left %d entries in TMPDIR:\n", len(left))
		for _, l := range left {
			fmt.Fprintln(stderr, "  ", l)
		}
		return 1
	}
	return code
}

// Leftovers lists the entries directly under dir, sorted.
func Leftovers(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, filepath.Join(dir, e.Name()))
	}
	sort.Strings(out)
	return out, nil
}

// ShortDir is a t.TempDir with a short path, for directories that will hold
// Unix sockets (sun_path holds 107 bytes; t.TempDir's paths carry the test's
// name).
func ShortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
