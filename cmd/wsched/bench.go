package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon"
	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

func newBenchCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Measure wsched against a baseline"}
	var conc, n int
	var external bool
	lease := &cobra.Command{
		Use:   "lease",
		Short: "Grant+release cycles over the socket, next to a bare HTTP echo over a Unix socket",
		Long: `Measure grant+release cycles (POST /v1/leases, DELETE /v1/leases/ID) over a Unix
socket and, in the same run, the same two requests against a bare HTTP echo server on
another Unix socket: the floor any Unix-socket HTTP API pays. Prints both and their
ratio. By default it starts its own daemon (8 simulated 80 GiB GPUs, state in a temp
dir, persisted as in production); --external measures the daemon at --socket instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if conc < 1 || n < 1 {
				return fmt.Errorf("-c and -n must be at least 1")
			}
			return a.benchLease(cmd.Context(), conc, n, external)
		},
	}
	lease.Flags().IntVarP(&conc, "concurrency", "c", 8, "concurrent clients")
	lease.Flags().IntVarP(&n, "requests", "n", 2000, "grant+release cycles in total")
	lease.Flags().BoolVar(&external, "external", false, "measure the running daemon at --socket instead of an in-process one")
	cmd.AddCommand(lease)
	return cmd
}

// benchResult summarises one measured run.
type benchResult struct {
	cycles  int
	elapsed time.Duration
	lat     []time.Duration
}

func (r benchResult) rate() float64 { return float64(r.cycles) / r.elapsed.Seconds() }

func (r benchResult) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)-1, int(p*float64(len(r.lat))))]
}

func (a *app) benchLease(ctx context.Context, conc, n int, external bool) error {
	dir, err := os.MkdirTemp("", "wsched-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	socket, where, stop, err := a.benchDaemon(ctx, dir, external)
	if err != nil {
		return err
	}
	defer stop()
	echo, stopEcho, err := startEcho(filepath.Join(dir, "echo.sock"))
	if err != nil {
		return err
	}
	defer stopEcho()

	lc := client.New(socket)
	defer lc.Close()
	leaseRes, err := measure(ctx, conc, n, func(ctx context.Context) error {
		l, err := lc.Acquire(ctx, api.LeaseRequest{MemoryBytes: units.GiB, TTLSeconds: 60})
		if err != nil {
			return err
		}
		_, err = lc.Release(ctx, l.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("lease cycle: %w", err)
	}
	ec := echoClient(echo)
	echoRes, err := measure(ctx, conc, n, func(ctx context.Context) error { return ec(ctx) })
	if err != nil {
		return fmt.Errorf("echo cycle: %w", err)
	}
	fmt.Fprintf(a.out, "wsched bench lease: %d cycles of 2 requests, %d clients, daemon: %s\n\n", n, conc, where)
	t := &table{header: []string{"", "CYCLES/S", "P50", "P99"}, right: map[int]bool{1: true, 2: true, 3: true}}
	for _, row := range []struct {
		name string
		r    benchResult
	}{{"grant+release (wsched)", leaseRes}, {"bare HTTP echo (floor)", echoRes}} {
		t.add([]string{row.name, fmt.Sprintf("%.0f", row.r.rate()), row.r.pct(0.5).Round(time.Microsecond).String(), row.r.pct(0.99).Round(time.Microsecond).String()})
	}
	if err := t.render(a.out, ""); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.out, "\nratio: a grant+release cycle costs %.1fx a bare echo cycle (p50 %.1fx)\n",
		echoRes.rate()/leaseRes.rate(), float64(leaseRes.pct(0.5))/float64(max(1, echoRes.pct(0.5))))
	return err
}

// benchDaemon returns the socket to measure: the configured one, or an
// in-process daemon's.
func (a *app) benchDaemon(ctx context.Context, dir string, external bool) (string, string, func(), error) {
	if external {
		cfg, err := a.loadConfig()
		if err != nil {
			return "", "", nil, err
		}
		if err := client.New(cfg.Daemon.Socket).Health(ctx); err != nil {
			return "", "", nil, err
		}
		return cfg.Daemon.Socket, "external at " + cfg.Daemon.Socket, func() {}, nil
	}
	cfg := config.Defaults()
	cfg.Daemon.StateDir = filepath.Join(dir, "state")
	cfg.Inventory.Provider = inventory.ProviderSim
	for i := 0; i < 8; i++ {
		cfg.Inventory.Sim = append(cfg.Inventory.Sim, inventory.SimGPU{Name: "Simulated 80GB GPU", Memory: units.Bytes(80 * units.GiB)})
	}
	socket := filepath.Join(dir, "wsched.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return "", "", nil, err
	}
	d, err := daemon.New(daemon.Options{Config: cfg, Listener: ln, Log: slog.New(slog.DiscardHandler), Version: version})
	if err != nil {
		return "", "", nil, err
	}
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = d.Run(dctx); close(done) }()
	c := client.New(socket)
	defer c.Close()
	for i := 0; c.Health(ctx) != nil; i++ {
		if i > 100 {
			cancel()
			return "", "", nil, fmt.Errorf("in-process daemon did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return socket, "in-process (8 simulated GPUs, bbolt state on disk)", func() { cancel(); <-done }, nil
}

// measure runs n cycles of f from conc goroutines.
func measure(ctx context.Context, conc, n int, f func(context.Context) error) (benchResult, error) {
	lat := make([]time.Duration, n)
	var next int
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := f(ctx); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	r := benchResult{cycles: n, elapsed: time.Since(start), lat: lat}
	slices.Sort(r.lat)
	return r, firstErr
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// startEcho serves a bare HTTP echo on a Unix socket: the floor.
func startEcho(path string) (string, func(), error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(w, r.Body)
	})}
	go func() { _ = srv.Serve(ln) }()
	return path, func() { _ = srv.Close() }, nil
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
