package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
)

// tmux drives a terminal program in a detached tmux session on a server of
// its own (socket in a short temp dir), killed when the test ends.
type tmux struct {
	t      *testing.T
	socket string
}

func newTmux(t *testing.T, dir string, env []string, args ...string) *tmux {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not found: make deps installs it (apt-get install tmux)")
	}
	tm := &tmux{t: t, socket: filepath.Join(dir, "tmux.sock")}
	cmdline := append(append([]string{"env"}, env...), args...)
	quoted := make([]string, len(cmdline))
	for i, a := range cmdline {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	// remain-on-exit keeps the pane after the program ends, to read how it ended.
	tm.run("-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", "140", "-y", "45", strings.Join(quoted, " ")+"; echo EXITED $?; sleep 60")
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", tm.socket, "kill-server").Run() })
	return tm
}

func (tm *tmux) run(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", tm.socket}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// capture returns the pane's text; with escapes, its SGR sequences too.
func (tm *tmux) capture(escapes bool) string {
	args := []string{"capture-pane", "-p", "-t", "top"}
	if escapes {
		args = append(args, "-e")
	}
	return tm.run(args...)
}

// waitFor polls the pane (bounded) until it shows every one of want.
func (tm *tmux) waitFor(want ...string) string {
	tm.t.Helper()
	var pane string
	for i := 0; i < 1500; i++ {
		pane = tm.capture(false)
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(pane, w)
		}
		if ok {
			return pane
		}
		time.Sleep(10 * time.Millisecond)
	}
	tm.t.Fatalf("pane never showed %q:\n%s", want, pane)
	return ""
}

// TestTopUnderTmux runs `wsched top` in a real terminal (tmux): it shows the
// GPUs, follows a lease grant and a queued request without input, changes
// the job order on s, quits on q, and with NO_COLOR writes no colour.
func TestTopUnderTmux(t *testing.T) {
	e := newE2E(t)
	e.serve()
	tm := newTmux(t, e.tmp, []string{"WSCHED_TEST_AS_MAIN=1", "WSCHED_CONFIG=" + e.config, "TMPDIR=" + e.tmp, "NO_COLOR=1", "TERM=xterm-256color"},
		os.Args[0], "top")
	tm.waitFor("wsched top", "GPU 0", "0 leases", "nothing waits", "jobs: newest")

	c := e.client()
	defer c.Close()
	ctx := context.Background()
	l, err := c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 20 * GiB, TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	tm.waitFor("1 leases", "leased 20.00 GiB")
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = c.Acquire(waitCtx, api.LeaseRequest{MemoryBytes: 10 * GiB, WaitSeconds: 60}) }()
	tm.waitFor("1 queued", "needs 10.00 GiB on auto")
	if _, err := c.Release(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	tm.waitFor("0 queued", "leased 10.00 GiB", "nothing waits")

	tm.run("send-keys", "-t", "top", "s")
	tm.waitFor("jobs: state")
	if pane := tm.capture(true); strings.Contains(pane, "\x1b[3") || strings.Contains(pane, "\x1b[9") || strings.Contains(pane, "38;5;") {
		t.Errorf("NO_COLOR is set but the pane has colour sequences:\n%q", pane)
	}
	tm.run("send-keys", "-t", "top", "q")
	pane := tm.waitFor("EXITED")
	if !strings.Contains(pane, "EXITED 0") {
		t.Errorf("top did not exit cleanly on q:\n%s", pane)
	}
}

// TestTopWithoutTerminal: `wsched top` with stdin from /dev/null and stdout
// into a pipe prints one plain snapshot of the daemon's GPUs and leases and
// exits 0 (bubbletea needs a terminal to read keys from).
func TestTopWithoutTerminal(t *testing.T) {
	e := newE2E(t)
	e.serve()
	c := e.client()
	defer c.Close()
	if _, err := c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: 20 * GiB, TTLSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	cmd := e.wsched("top") // stdin: /dev/null
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wsched top without a terminal: %v\nstderr: %s\nstdout: %s", err, stderr.String(), stdout.String())
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("wsched top without a terminal did not exit within a minute\nstdout: %s", stdout.String())
	}
	out := stdout.String()
	for _, want := range []string{"wsched top", "GPU 0", "1 leases", "leased 20.00 GiB", "nothing waits", "a snapshot: no terminal"} {
		if !strings.Contains(out, want) {
			t.Errorf("snapshot lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("snapshot into a pipe has escape sequences:\n%q", out)
	}
}
