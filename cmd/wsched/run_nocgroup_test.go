package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/asuser"
	"github.com/wsched/wsched/internal/cgroup"
)

// TestRunWarnsWithoutOwnCgroup: a `wsched run` that cannot give its child a
// cgroup of its own (uid nobody, cgroup hierarchies only root may write,
// no systemd) says so on stderr — what the child detaches with setsid may
// outlive the run — and still runs the child and returns its status.
func TestRunWarnsWithoutOwnCgroup(t *testing.T) {
	dir := asuser.Dir(t) // skips unless root
	if _, err := cgroup.Open("/proc", "wsched-run-probe"); err != nil {
		t.Skipf("no writable cgroup hierarchy even for root: %v", err)
	}
	if systemdBooted() {
		t.Skip("systemd is PID 1: the run asks it for a scope")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := asuser.Command(ctx, t, dir, "", "run", "--", "sh", "-c", "exit 3")
	cmd.Env = append(cmd.Env, "WSCHED_TEST_AS_MAIN=1", "WSCHED_LEASE_ID=l-outer", "TMPDIR="+dir)
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("exit %d (%v), want the child's 3:\n%s", code, err, out)
	}
	if !strings.Contains(string(out), "wsched: warning: the child has no cgroup of its own (") || !strings.Contains(string(out), "setsid may outlive the run") {
		t.Errorf("no warning about the missing cgroup:\n%s", out)
	}
	if os.Getuid() == 0 && strings.Count(string(out), "warning") > 1 {
		t.Errorf("more than the one warning:\n%s", out)
	}
}
