package main

import (
	"strings"
	"testing"
)

// TestRunQuickChildNoWarning: a child that exits before `wsched run` has
// registered its PID with the lease (`wsched run -- true`) is not a
// warning: the registration lost a race with the child, nothing is wrong.
func TestRunQuickChildNoWarning(t *testing.T) {
	e := newE2E(t)
	e.serve()
	for i := range 20 {
		out, err := e.wsched("run", "--", "true").CombinedOutput()
		if err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
		if strings.Contains(string(out), "register pid") {
			t.Fatalf("run %d warned about a child that had already exited:\n%s", i, out)
		}
	}
}
