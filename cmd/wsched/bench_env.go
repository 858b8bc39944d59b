package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/units"
)

// benchEnv is what a bench measures: the daemon's socket and an echo
// server's, each served by a process of its own.
type benchEnv struct {
	socket, echo, where string
	dir                 string
	procs               []*exec.Cmd
	daemon              *exec.Cmd
	daemonLog           *bytes.Buffer
	env                 []string // the daemon's environment beyond the bench's own
}

func startBenchEnv(ctx context.Context, o benchOpts) (env *benchEnv, err error) {
	dir, err := os.MkdirTemp("", "wsb-") // short: socket paths are limited
	if err != nil {
		return nil, err
	}
	env = &benchEnv{dir: dir, echo: filepath.Join(dir, "echo.sock"), daemonLog: &bytes.Buffer{}}
	defer func() {
		if err != nil {
			env.stop()
		}
	}()
	if err := env.startEcho(ctx); err != nil {
		return nil, err
	}
	if o.external {
		return env, nil // the caller sets socket from the configuration
	}
	if err := env.startDaemon(ctx, o); err != nil {
		return nil, err
	}
	return env, nil
}

func (e *benchEnv) self(ctx context.Context, args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	return cmd, nil
}

func (e *benchEnv) startEcho(ctx context.Context) error {
	cmd, err := e.self(ctx, "bench", "echo-server", "--listen", e.echo)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start echo server: %w", err)
	}
	e.procs = append(e.procs, cmd)
	return waitSocket(ctx, e.echo)
}

// startDaemon runs `wsched serve` over simulated 80 GiB GPUs, with a queue
// long enough for the waiters and a backfill window and aging longer than
// the run (so the waiters neither hold memory nor reorder while measured).
func (e *benchEnv) startDaemon(ctx context.Context, o benchOpts) error {
	e.socket = filepath.Join(e.dir, "wsched.sock")
	var cfg strings.Builder
	// Every waiter holds a connection (a long poll): room for them all.
	conns := max(4096, o.waiters+o.conc+256)
	fmt.Fprintf(&cfg, "[daemon]\nsocket = %q\nstate_dir = %q\nmax_connections = %d\nmax_connections_per_uid = %d\n",
		e.socket, filepath.Join(e.dir, "state"), conns, conns)
	fmt.Fprintf(&cfg, "[inventory]\nprovider = \"sim\"\n[placement]\nreserved = \"0B\"\nsafety_factor = 1.0\n")
	fmt.Fprintf(&cfg, "[leases]\nmax_queue = %d\nbackfill_window = \"24h\"\naging = \"24h\"\nmax_wait = \"24h\"\n", o.waiters+64)
	for i := 0; i < o.gpus; i++ {
		fmt.Fprintf(&cfg, "[[inventory.sim]]\nname = \"Simulated 80GB GPU\"\nmemory = \"80GiB\"\n")
	}
	path := filepath.Join(e.dir, "wsched.toml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		return err
	}
	e.where = fmt.Sprintf("wsched serve in its own process (%d simulated GPUs, state on disk, fsync on)", o.gpus)
	if o.noFsync {
		e.where = fmt.Sprintf("wsched serve in its own process (%d simulated GPUs, state on disk, WSCHED_UNSAFE_NO_FSYNC=1)", o.gpus)
		e.env = append(e.env, unsafeNoFsyncEnv+"=1")
	}
	return e.serve(ctx)
}

// serve starts the daemon with the config in the bench dir and waits
// until it answers.
func (e *benchEnv) serve(ctx context.Context) error {
	path := filepath.Join(e.dir, "wsched.toml")
	cmd, err := e.self(ctx, "serve")
	if err != nil {
		return err
	}
	cmd.Env = append(append(os.Environ(), "WSCHED_CONFIG="+path), e.env...)
	cmd.Stderr = e.daemonLog
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	e.procs, e.daemon = append(e.procs, cmd), cmd
	c := client.New(e.socket)
	defer c.Close()
	for deadline := time.Now().Add(30 * time.Second); c.Health(ctx) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			return fmt.Errorf("daemon did not start:\n%s", e.daemonLog.String())
		}
	}
	return nil
}

func (e *benchEnv) stop() {
	for _, p := range e.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
		_ = p.Wait()
	}
	_ = os.RemoveAll(e.dir)
}

// idleCPU returns the daemon's CPU time over d as a percentage of d.
func (e *benchEnv) idleCPU(ctx context.Context, d time.Duration) (float64, error) {
	before, err := cpuTicks(e.daemon.Process.Pid)
	if err != nil {
		return 0, err
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	after, err := cpuTicks(e.daemon.Process.Pid)
	if err != nil {
		return 0, err
	}
	const hz = 100 // USER_HZ: clock ticks per second in /proc on Linux
	return 100 * float64(after-before) / hz / d.Seconds(), nil
}

// cpuTicks is a process's user + system time in clock ticks.
func cpuTicks(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	var utime, stime uint64
	if _, err := fmt.Sscan(f[11], &utime); err != nil {
		return 0, err
	}
	if _, err := fmt.Sscan(f[12], &stime); err != nil {
		return 0, err
	}
	return utime + stime, nil
}

// restart kills the daemon with SIGKILL, starts it again and returns how
// long it took to answer with its leases restored.
func (e *benchEnv) restart(ctx context.Context) (time.Duration, int, error) {
	_ = e.daemon.Process.Kill()
	_ = e.daemon.Wait()
	start := time.Now()
	if err := e.serve(ctx); err != nil {
		return 0, 0, err
	}
	took := time.Since(start)
	c := client.New(e.socket)
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		return 0, 0, err
	}
	return took, st.Leases, nil
}

// waitSocket waits until a Unix socket accepts a connection.
func waitSocket(ctx context.Context, path string) error {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s does not answer: %w", path, err)
		}
	}
}

// newEchoServerCmd is the echo server's process (hidden: bench lease runs
// it).
func newEchoServerCmd() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:    "echo-server",
		Short:  "Serve a bare HTTP echo on a Unix socket (the floor for bench lease)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := net.Listen("unix", listen)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.Copy(w, r.Body)
			})}
			stop := context.AfterFunc(cmd.Context(), func() { _ = srv.Close() })
			defer stop()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "Unix socket path")
	return cmd
}

// echoClient makes the same two requests a lease cycle makes.
func echoClient(socket string) func(context.Context) error {
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 64,
	}}
	body := `{"memory_bytes":1073741824,"ttl_seconds":60}`
	one := func(ctx context.Context, method string) error {
		req, _ := http.NewRequestWithContext(ctx, method, "http://echo/v1/leases", strings.NewReader(body))
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	return func(ctx context.Context) error {
		if err := one(ctx, http.MethodPost); err != nil {
			return err
		}
		return one(ctx, http.MethodDelete)
	}
}

// benchLoad is the scale a bench runs at: live leases and waiters.
type benchLoad struct {
	leases, waiters int
	took            time.Duration
	c               *client.Client
	cancel          context.CancelFunc
	wg              sync.WaitGroup

	release bool // release the leases at the end (an external daemon)
	mu      sync.Mutex
	ids     []string // the leases granted
}

// loadDaemon grants o.leases leases spread over the GPUs (each GPU ends
// up with at most 60 GiB leased) and queues o.waiters requests of 70 GiB
// that cannot fit, then returns once they all wait.
func loadDaemon(ctx context.Context, socket string, o benchOpts) (*benchLoad, error) {
	l := &benchLoad{c: client.New(socket), release: o.external}
	if o.leases == 0 && o.waiters == 0 {
		return l, nil
	}
	start := time.Now()
	size := int64(60*units.GiB) / int64((o.leases+o.gpus-1)/max(1, o.gpus))
	_, err := measure(ctx, 16, o.leases, func(ctx context.Context) error {
		lease, err := l.c.Acquire(ctx, api.LeaseRequest{MemoryBytes: size, TTLSeconds: 86400})
		if err == nil {
			l.mu.Lock()
			l.ids = append(l.ids, lease.ID)
			l.mu.Unlock()
		}
		return err
	})
	if err != nil {
		l.stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("load leases: %w", err)
	}
	l.leases = o.leases
	wctx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	for i := 0; i < o.waiters; i++ {
		l.wg.Go(func() {
			_, _ = l.c.Acquire(wctx, api.LeaseRequest{MemoryBytes: 70 * units.GiB, WaitSeconds: 86400, TTLSeconds: 60})
		})
	}
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		st, err := l.c.Status(ctx)
		if err != nil {
			l.stop(context.WithoutCancel(ctx))
			return nil, err
		}
		if st.QueueLength >= o.waiters {
			break
		}
		if time.Now().After(deadline) {
			l.stop(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("only %d of %d waiters queued", st.QueueLength, o.waiters)
		}
	}
	l.waiters, l.took = o.waiters, time.Since(start)
	return l, nil
}

// stop withdraws the waiters and releases the leases (a daemon the bench
// started is stopped instead, so only an external one needs it: release
// says whether to).
func (l *benchLoad) stop(ctx context.Context) {
	if l.cancel != nil {
		l.cancel()
		l.wg.Wait()
	}
	if l.release {
		_, _ = measure(ctx, 16, len(l.ids), func(ctx context.Context) error {
			l.mu.Lock()
			id := l.ids[len(l.ids)-1]
			l.ids = l.ids[:len(l.ids)-1]
			l.mu.Unlock()
			_, err := l.c.Release(ctx, id)
			return err
		})
	}
	l.c.Close()
}
