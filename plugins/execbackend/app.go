package execbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// An error shows the app's first headLines output lines (its banner, what
// it loads) and its last logLines.
const (
	headLines = 10
	logLines  = 20
)

// app is one running instance of an app: its process group, its port and
// the tail of its output.
type app struct {
	s    Settings
	cmd  *exec.Cmd
	pid  int // also the process group's ID
	base string
	tail *tailWriter
	done chan struct{} // closed when the process has exited
	err  error         // how it exited; read after done
}

// freePort asks the kernel for a free loopback port. The app binds it a
// moment later; another process taking it in between makes the start fail
// with the app's own bind error.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startApp starts the app in its own process group with env, its output
// copied to log (and kept for errors).
func startApp(s Settings, env []string, port int, log *slog.Logger) (*app, error) {
	if st, err := os.Stat(s.Dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("app %q: directory %s: %w", s.Name, s.Dir, firstErr(err, errors.New("not a directory")))
	}
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Dir, cmd.Env = s.Dir, env
	// Its own process group, so stop reaches its workers; killed by the
	// kernel if this backend dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	tail := &tailWriter{log: log.With("app", s.Name)}
	cmd.Stdout, cmd.Stderr = tail, tail
	cmd.WaitDelay = time.Second // workers holding the pipes must not hold Wait
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("app %q: start %s in %s: %w", s.Name, s.commandLine(), s.Dir, err)
	}
	a := &app{s: s, cmd: cmd, pid: cmd.Process.Pid, base: fmt.Sprintf("http://127.0.0.1:%d", port), tail: tail, done: make(chan struct{})}
	go func() {
		a.err = cmd.Wait()
		// Whatever the app left in its group (workers) goes with it.
		_ = syscall.Kill(-a.pid, syscall.SIGKILL)
		close(a.done)
	}()
	return a, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// exited reports whether the app's process has ended.
func (a *app) exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// describe names the app for errors: name, command, directory.
func (a *app) describe() string {
	return fmt.Sprintf("app %q (%s in %s, pid %d)", a.s.Name, a.s.commandLine(), a.s.Dir, a.pid)
}

// exitNote says how the app ended and what it printed last.
func (a *app) exitNote() string {
	return fmt.Sprintf("%s exited (%v)%s", a.describe(), a.err, a.tail.note())
}

// waitHealthy polls the health route until it answers 2xx, the app exits,
// or s.StartTimeout passes.
func (a *app) waitHealthy(ctx context.Context, client *http.Client) error {
	ctx, cancel := context.WithTimeout(ctx, a.s.StartTimeout)
	defer cancel()
	url := a.base + a.s.Health
	start := time.Now()
	tick := time.NewTimer(0)
	defer tick.Stop()
	var last error
	for {
		if last = a.probe(ctx, client, url); last == nil {
			return nil
		}
		tick.Reset(pollInterval(time.Since(start)))
		select {
		case <-a.done:
			return errors.New(a.exitNote() + " before answering " + url)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s did not become healthy: %s did not answer 2xx within %s (last: %v)%s",
					a.describe(), url, a.s.StartTimeout, last, a.tail.note())
			}
			return fmt.Errorf("%s: waiting for %s: %w", a.describe(), url, ctx.Err())
		case <-tick.C:
		}
	}
}

// pollInterval is the wait between health probes: quick while a quick app
// starts, then quieter in the log of an app that loads a model for minutes.
func pollInterval(waited time.Duration) time.Duration {
	switch {
	case waited < time.Second:
		return 25 * time.Millisecond
	case waited < 10*time.Second:
		return 250 * time.Millisecond
	}
	return time.Second
}

// probe asks the health route once.
func (a *app) probe(ctx context.Context, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// stop ends the app's whole process group: SIGTERM, then SIGKILL after
// grace or when ctx ends.
func (a *app) stop(ctx context.Context, grace time.Duration) {
	_ = syscall.Kill(-a.pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-a.done:
	case <-t.C:
	case <-ctx.Done():
	}
	_ = syscall.Kill(-a.pid, syscall.SIGKILL)
	<-a.done
}

// tailWriter copies the app's output to the log line by line and keeps
// the last logLines lines.
type tailWriter struct {
	log     *slog.Logger
	mu      sync.Mutex
	partial []byte
	head    []string // the first headLines lines
	lines   []string // the last logLines lines after those
	dropped int      // lines between head and lines
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := strings.IndexByte(string(w.partial), '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(w.partial[:i]), "\r")
		w.partial = w.partial[i+1:]
		w.log.Info(line)
		if len(w.head) < headLines {
			w.head = append(w.head, line)
			continue
		}
		w.lines = append(w.lines, line)
		if len(w.lines) > logLines {
			w.lines, w.dropped = w.lines[1:], w.dropped+1
		}
	}
	if len(w.partial) > 64<<10 { // a line without end: keep the log bounded
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

// note is ": its last output lines:\n…" or "" when it printed nothing.
func (w *tailWriter) note() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := append([]string(nil), w.head...)
	if w.dropped > 0 {
		lines = append(lines, fmt.Sprintf("… %d lines …", w.dropped))
	}
	lines = append(lines, w.lines...)
	if len(w.partial) > 0 {
		lines = append(lines, string(w.partial))
	}
	if len(lines) == 0 {
		return "; it printed nothing"
	}
	return "; its output:\n  " + strings.Join(lines, "\n  ")
}
