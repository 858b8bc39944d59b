package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/asuser"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// decodeInto reads resp's JSON body into v and closes it.
func decodeInto(resp *http.Response, v any) error {
	defer resp.Body.Close()
	defer io.Copy(io.Discard, resp.Body)
	return json.NewDecoder(resp.Body).Decode(v)
}

// cyclesHelper runs as root or nobody: n grant+release cycles over socket,
// one after the other on one connection; it prints the mean ns per cycle.
func cyclesHelper(args []string) int {
	socket := args[0]
	n, _ := strconv.Atoi(args[1])
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	cycle := func() error {
		resp, err := hc.Post("http://wsched/v1/leases", "application/json", strings.NewReader(`{"memory_bytes": 1048576}`))
		if err != nil {
			return err
		}
		var l struct {
			ID string `json:"id"`
		}
		err = decodeInto(resp, &l)
		if err != nil || resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("grant: %d %v", resp.StatusCode, err)
		}
		req, _ := http.NewRequest(http.MethodDelete, "http://wsched/v1/leases/"+l.ID, nil)
		resp, err = hc.Do(req)
		if err != nil {
			return err
		}
		if err := decodeInto(resp, &l); err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("release: %d %v", resp.StatusCode, err)
		}
		return nil
	}
	if err := cycle(); err != nil { // warm the connection
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	for range n {
		if err := cycle(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println(time.Since(start).Nanoseconds() / int64(n))
	return 0
}

// cyclesAs runs cyclesHelper as nobody (asNobody true) or as root and
// returns its ns per cycle.
func cyclesAs(tb testing.TB, dir, socket string, n int, asNobody bool) float64 {
	tb.Helper()
	var cmd *exec.Cmd
	if asNobody {
		cmd = asuser.Command(context.Background(), tb, dir, "cycles", socket, strconv.Itoa(n))
	} else {
		self, err := os.Executable()
		if err != nil {
			tb.Fatal(err)
		}
		cmd = exec.Command(self, socket, strconv.Itoa(n))
		cmd.Env = append(os.Environ(), "WSCHED_ASUSER_HELPER=cycles")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("cycles helper (nobody %v): %v: %s", asNobody, err, out)
	}
	ns, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		tb.Fatalf("cycles helper said %q", out)
	}
	return ns
}

// benchDaemon serves one simulated 80 GiB GPU on dir/w.sock as the test
// harness's daemons do, logging warnings only (debug lines would be
// measured); stop ends it.
func benchDaemon(b testing.TB, dir string) (d *Daemon, socket string, stop func()) {
	cfg := config.Defaults()
	cfg.Daemon.StateDir = filepath.Join(b.TempDir(), "state")
	cfg.Daemon.Socket = filepath.Join(dir, "w.sock")
	cfg.Daemon.SocketMode = 0o666
	cfg.Placement.Reserved, cfg.Placement.SafetyFactor = 0, 1
	cfg.Inventory.Provider = inventory.ProviderSim
	cfg.Inventory.Sim = []inventory.SimGPU{{Name: "Sim GPU", Memory: units.Bytes(80 * GiB)}}
	sim := inventory.NewSim(cfg.Inventory.Sim)
	p, err := inventory.NewNVML(sim.Interface(), inventory.WithName("sim"))
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testshared.LogWriter(b), &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Without fsync: the disk's noise would hide the per-request cost
	// compared (WSCHED_BENCH_FSYNC=1 keeps it).
	d, err = New(Options{Config: cfg, Log: log, Provider: p, Version: "bench", UnsafeNoFsync: os.Getenv("WSCHED_BENCH_FSYNC") != "1"})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	c := client.New(cfg.Daemon.Socket)
	defer c.Close()
	testshared.WaitHealthy(b, c)
	return d, cfg.Daemon.Socket, func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("daemon: %v", err)
		}
	}
}

// loadLeases grants n 1 MiB leases to root through the engine, many at
// once so their commits are shared.
func loadLeases(tb testing.TB, eng *placement.Engine, n int) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 64 {
		wg.Go(func() {
			for i := w; i < n; i += 64 {
				_, err := eng.Acquire(context.Background(), placement.Request{Bytes: 1 << 20, TTL: time.Hour,
					Holder: placement.Holder{PID: os.Getpid(), UID: 0, Name: "load"}})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkLeaseNobodyVsRoot (issue 25 item 12): grant+release cycles over
// the Unix socket by uid nobody, whose [limits] apply, next to the same by
// root, whose do not, on a daemon holding 20k leases (WSCHED_BENCH_LEASES
// changes it; journal without fsync unless WSCHED_BENCH_FSYNC=1). Both
// clients are processes of their own; 9 rounds alternate.
// Reports each one's median ns per cycle and nobody/root (goal: ≤ 1.2).
func BenchmarkLeaseNobodyVsRoot(b *testing.B) {
	n := 20_000
	if v := os.Getenv("WSCHED_BENCH_LEASES"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	dir := asuser.Dir(b)
	d, socket, stop := benchDaemon(b, dir)
	defer stop()
	start := time.Now()
	loadLeases(b, d.eng, n)
	b.Logf("loaded %d leases in %v", n, time.Since(start).Round(time.Millisecond))
	const rounds = 9
	per := max(100, b.N/rounds)
	var root, nobody []float64
	b.ResetTimer()
	for range rounds {
		root = append(root, cyclesAs(b, dir, socket, per, false))
		nobody = append(nobody, cyclesAs(b, dir, socket, per, true))
	}
	b.StopTimer()
	slices.Sort(root)
	slices.Sort(nobody)
	r, o := root[len(root)/2], nobody[len(nobody)/2]
	b.ReportMetric(r, "root-ns/cycle")
	b.ReportMetric(o, "nobody-ns/cycle")
	b.ReportMetric(o/r, "nobody/root")
	b.Logf("%d leases: root %.0f µs/cycle, nobody %.0f µs/cycle, nobody/root %.2f (rounds root %v, nobody %v)", n, r/1e3, o/1e3, o/r, root, nobody)
}
