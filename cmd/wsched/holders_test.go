package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The holder scenarios of issue 14 (items 8 and 9). Each returns a figure
// for `make reliability`'s table and whether it passed.

// runKilledScenario: `wsched run` killed with SIGKILL cannot forward
// anything and its lease ends at once; its child must not keep using the
// GPU (PR_SET_PDEATHSIG).
func runKilledScenario(t *testing.T) (string, bool) {
	e := newE2E(t)
	e.serve()
	cmd := e.wsched("run", "--", "sh", "-c", `echo $$; exec sleep 120`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		t.Fatalf("child pid: %v", err)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	killed := time.Now()
	for alive(pid) {
		if time.Since(killed) > 10*time.Second {
			return "child still runs 10 s later", false
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Sprintf("child gone %.1f ms after run was killed", float64(time.Since(killed).Microseconds())/1000), true
}

func TestRunKilledTakesChildAlong(t *testing.T) {
	if fig, ok := runKilledScenario(t); !ok {
		t.Error(fig)
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// substitutionScenario: `eval "$(wsched lease … 2>/dev/null)"` runs wsched
// in a subshell bash forks for the substitution; the lease must belong to
// the shell, not end with the subshell, and end with the shell.
func substitutionScenario(t *testing.T) (string, bool) {
	e := newE2E(t)
	e.serve()
	cmd := e.wsched()
	script := fmt.Sprintf(`eval "$(%s lease --memory 1MiB 2>/dev/null)"; echo "$WSCHED_LEASE_ID"; read x`, os.Args[0])
	cmd.Path, cmd.Args = "/bin/bash", []string{"bash", "-c", script}
	if p, err := exec.LookPath("bash"); err == nil {
		cmd.Path = p
	}
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	if _, err := fmt.Fscan(out, &id); err != nil {
		t.Fatalf("no lease id: %v", err)
	}
	c := e.client()
	defer c.Close()
	time.Sleep(500 * time.Millisecond) // the subshell is long gone
	l, err := c.Lease(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	fig := fmt.Sprintf("lease %s 500 ms later", l.State)
	ok := l.State == "granted" && l.Holder.PID == cmd.Process.Pid
	if l.Holder.PID == cmd.Process.Pid {
		fig += ", held by the shell"
	}
	stdin.Close()
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if l, err := c.Lease(context.Background(), id); err == nil && l.State != "granted" {
			return fig + "; ended with the shell", ok
		}
		if time.Now().After(deadline) {
			return fig + "; outlived the shell", false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLeaseInCommandSubstitution(t *testing.T) {
	if fig, ok := substitutionScenario(t); !ok {
		t.Error(fig)
	}
}

// asScenario makes a test a row of the table: its figure when it passes.
func asScenario(test func(*testing.T), passed string) func(*testing.T) (string, bool) {
	return func(t *testing.T) (string, bool) {
		test(t)
		if t.Failed() {
			return "failed (see the test's log)", false
		}
		return passed, true
	}
}

// TestReliabilityHolders adds the holder rows to `make reliability`'s
// table (WSCHED_RELIABILITY names it; the daemon package writes the rest).
func TestReliabilityHolders(t *testing.T) {
	out := os.Getenv("WSCHED_RELIABILITY")
	if out == "" {
		t.Skip("run by `make reliability`")
	}
	var b strings.Builder
	row := func(name, figure, before string, f func(*testing.T) (string, bool)) {
		var fig string
		var ok bool
		t.Run(name, func(t *testing.T) { fig, ok = f(t) })
		fmt.Fprintf(&b, "| %-30s | %-46s | %-46s | %-46s | %-4v |\n", name, figure, before, fig, ok)
		if !ok {
			t.Errorf("scenario %q failed: %s", name, fig)
		}
	}
	row(`eval "$(wsched lease …)"`, "lease after the subshell exited", "issue: ended at once", substitutionScenario)
	row("wsched run killed -9", "its child", "issue: child kept running", runKilledScenario)
	row("daemon down past the TTL", "run's lease: kill -9, 1.5 s down, TTL 1 s", "issue: lost; an error every 2 s", asScenario(
		TestRunKeepsLeaseThroughOutage, "same lease restored and renewed; said once"))
	row("daemon back without the lease", "run's lease: kill -9, state removed", "issue: lost; an error every 2 s", asScenario(
		TestRunReacquiresLostLease, "same size re-acquired, child registered"))
	row("graceful restart, run --wait queued", "run --wait --priority high", "issue: 409, run exits 1", asScenario(
		TestRunWaitSurvivesRestart, "asked again as high; ran, exit 0"))
	row("daemon SIGSTOPped past the TTL", "live holder's lease: 7 s stopped, TTL 2 s", "issue: expired at resume", asScenario(
		TestLeaseSurvivesDaemonStop, "kept (TTL given the stall back), then expired"))
	if err := os.WriteFile(out+".holders", []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
