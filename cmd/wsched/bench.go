package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/units"
)

// benchOpts are the flags of `wsched bench lease`.
type benchOpts struct {
	conc, n, rounds       int
	leases, waiters, gpus int
	external              bool
	idle                  time.Duration
	restart, dispatch     bool
	noFsync               bool
}

func newBenchCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Measure wsched against a baseline"}
	var o benchOpts
	lease := &cobra.Command{
		Use:   "lease",
		Short: "Grant+release cycles over the socket, next to a bare HTTP echo over a Unix socket",
		Long: `Measure grant+release cycles (POST /v1/leases, DELETE /v1/leases/ID) over a Unix
socket and, interleaved with them, the same two requests against a bare HTTP echo
server on another Unix socket: the floor any Unix-socket HTTP API pays. The echo
server runs in a process of its own, as the daemon does, and this process is the
client of both. Rounds alternate between the two; each round's ratio is its
lease cycle time over its echo cycle time, and the min/median/max over the rounds
is printed with the rates and latencies.

By default it starts a daemon (wsched serve) with --gpus simulated 80 GiB GPUs and
its state (bbolt, fsync on) in a temp dir. --leases N and --waiters M load it
first: N live leases spread over the GPUs and M requests waiting for memory that
is not there, so the cycles are measured at that scale. --external measures the
daemon at --socket instead (its leases and queue as they are, plus --leases and
--waiters; they are withdrawn at the end). --unsafe-no-fsync starts the daemon with
WSCHED_UNSAFE_NO_FSYNC=1 (its lease journal is written but never fsynced): what the
lease path costs without the disk, for comparison only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.conc < 1 || o.n < 1 || o.rounds < 5 || o.gpus < 1 || o.leases < 0 || o.waiters < 0 || (o.dispatch && !o.external && o.gpus < o.conc) {
				return fmt.Errorf("want -c ≥ 1, -n ≥ 1, --rounds ≥ 5, --gpus ≥ 1 (≥ -c with --dispatch), --leases and --waiters ≥ 0")
			}
			if o.external && (o.idle > 0 || o.restart || o.noFsync) {
				return fmt.Errorf("--idle, --restart and --unsafe-no-fsync need the daemon the bench starts, not --external")
			}
			return a.benchLease(cmd.Context(), o)
		},
	}
	f := lease.Flags()
	f.IntVarP(&o.conc, "concurrency", "c", 8, "concurrent clients")
	f.IntVarP(&o.n, "requests", "n", 2000, "grant+release cycles in total (as many echo cycles)")
	f.IntVar(&o.rounds, "rounds", 5, "interleaved rounds (at least 5)")
	f.IntVar(&o.leases, "leases", 0, "live leases to load the daemon with before measuring")
	f.IntVar(&o.waiters, "waiters", 0, "waiting requests to load the daemon with before measuring")
	f.IntVar(&o.gpus, "gpus", 8, "simulated GPUs of the daemon it starts")
	f.BoolVar(&o.external, "external", false, "measure the running daemon at --socket instead of starting one")
	f.DurationVar(&o.idle, "idle", 0, "after the rounds, measure the daemon's CPU use while idle for this long")
	f.BoolVar(&o.dispatch, "dispatch", false, "after the rounds, measure release → grant of a waiter with -c pairs (needs -c GPUs)")
	f.BoolVar(&o.restart, "restart", false, "after the rounds, kill -9 the daemon and time its start-up with the leases")
	f.BoolVar(&o.noFsync, "unsafe-no-fsync", false, "start the daemon without fsync of its lease journal (a baseline: what the disk costs)")
	cmd.AddCommand(lease, newEchoServerCmd(), newBenchStreamsCmd(a))
	return cmd
}

// benchResult summarises measured cycles.
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

// add merges another round into r.
func (r *benchResult) add(o benchResult) {
	r.cycles += o.cycles
	r.elapsed += o.elapsed
	r.lat = append(r.lat, o.lat...)
}

func (a *app) benchLease(ctx context.Context, o benchOpts) error {
	env, err := startBenchEnv(ctx, o)
	if err != nil {
		return err
	}
	defer env.stop()
	if o.external {
		cfg, err := a.loadConfig()
		if err != nil {
			return err
		}
		if err := client.New(cfg.Daemon.Socket).Health(ctx); err != nil {
			return err
		}
		env.socket, env.where = cfg.Daemon.Socket, "external at "+cfg.Daemon.Socket
	}
	lc := client.New(env.socket)
	defer lc.Close()
	load, err := loadDaemon(ctx, env.socket, o)
	if err != nil {
		return err
	}
	defer load.stop(context.WithoutCancel(ctx))
	leaseCycle := func(ctx context.Context) error {
		l, err := lc.Acquire(ctx, api.LeaseRequest{MemoryBytes: units.GiB, TTLSeconds: 60})
		if err != nil {
			return err
		}
		_, err = lc.Release(ctx, l.ID)
		return err
	}
	echoCycle := echoClient(env.echo)
	per := max(1, o.n/o.rounds)
	// Warm both: connections, the daemon's first reading.
	if _, err := measure(ctx, o.conc, min(per, 100), leaseCycle); err != nil {
		return fmt.Errorf("lease cycle: %w", err)
	}
	if _, err := measure(ctx, o.conc, min(per, 100), echoCycle); err != nil {
		return fmt.Errorf("echo cycle: %w", err)
	}
	var leaseAll, echoAll benchResult
	var ratios []float64
	before, err := lc.Status(ctx)
	if err != nil {
		return err
	}
	for r := 0; r < o.rounds; r++ {
		var lr, er benchResult
		first, second := &lr, &er
		f1, f2 := leaseCycle, echoCycle
		if r%2 == 1 { // alternate which goes first
			first, second, f1, f2 = &er, &lr, echoCycle, leaseCycle
		}
		if *first, err = measure(ctx, o.conc, per, f1); err != nil {
			return fmt.Errorf("round %d: %w", r+1, err)
		}
		if *second, err = measure(ctx, o.conc, per, f2); err != nil {
			return fmt.Errorf("round %d: %w", r+1, err)
		}
		ratios = append(ratios, er.rate()/lr.rate())
		leaseAll.add(lr)
		echoAll.add(er)
	}
	if err := a.benchReport(o, env.where, load, leaseAll, echoAll, ratios); err != nil {
		return err
	}
	if after, err := lc.Status(ctx); err == nil && after.Stats.Commits > before.Stats.Commits {
		commits := after.Stats.Commits - before.Stats.Commits
		changes := after.Stats.CommittedChanges - before.Stats.CommittedChanges
		fmt.Fprintf(a.out, "lease journal: %d commits (fdatasync) for %d changes: %.1f changes per commit, %.2f commits per cycle\n",
			commits, changes, float64(changes)/float64(commits), float64(commits)/float64(max(1, leaseAll.cycles)))
	}
	if o.dispatch {
		lat, err := dispatchLatency(ctx, lc, o.conc, max(10, 400/o.conc))
		if err != nil {
			return err
		}
		r := benchResult{lat: lat}
		fmt.Fprintf(a.out, "dispatch (release → grant of a waiter), %d pairs, %d hand-overs: p50 %v  p99 %v  max %v\n", o.conc, len(lat),
			r.pct(0.5).Round(time.Microsecond), r.pct(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	}
	if o.idle > 0 {
		pct, err := env.idleCPU(ctx, o.idle)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.out, "daemon CPU while idle for %v with %d leases and %d waiting: %.2f%% of one core\n", o.idle, load.leases, load.waiters, pct)
	}
	if o.restart {
		took, n, err := env.restart(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.out, "daemon start-up after kill -9 with %d leases restored: %v\n", n, took.Round(time.Millisecond))
	}
	return nil
}

func (a *app) benchReport(o benchOpts, where string, load *benchLoad, lease, echo benchResult, ratios []float64) error {
	slices.Sort(lease.lat)
	slices.Sort(echo.lat)
	fmt.Fprintf(a.out, "wsched bench lease: %d rounds of %d cycles of 2 requests, %d clients, daemon: %s\n",
		o.rounds, max(1, o.n/o.rounds), o.conc, where)
	if load != nil && (load.leases > 0 || load.waiters > 0) {
		fmt.Fprintf(a.out, "loaded with %d live leases and %d waiting requests (in %v)\n", load.leases, load.waiters, load.took.Round(time.Millisecond))
	}
	fmt.Fprintln(a.out)
	t := &table{header: []string{"", "CYCLES/S", "P50", "P99"}, right: map[int]bool{1: true, 2: true, 3: true}}
	for _, row := range []struct {
		name string
		r    benchResult
	}{{"grant+release (wsched)", lease}, {"bare HTTP echo (floor)", echo}} {
		t.add([]string{row.name, fmt.Sprintf("%.0f", row.r.rate()), row.r.pct(0.5).Round(time.Microsecond).String(), row.r.pct(0.99).Round(time.Microsecond).String()})
	}
	if err := t.render(a.out, ""); err != nil {
		return err
	}
	sorted := slices.Sorted(slices.Values(ratios))
	_, err := fmt.Fprintf(a.out, "\nratio (cycle time / echo cycle time) over %d rounds: min %.2fx  median %.2fx  max %.2fx  (p50 %.2fx)\n",
		len(ratios), sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1],
		float64(lease.pct(0.5))/float64(max(1, echo.pct(0.5))))
	return err
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
		wg.Go(func() {
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
		})
	}
	wg.Wait()
	return benchResult{cycles: n, elapsed: time.Since(start), lat: lat}, firstErr
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
