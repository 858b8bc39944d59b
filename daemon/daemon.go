// Package daemon is `wsched serve`: it builds the daemon's components (the
// inventory, the state database, the placement engine, the plugin host, the
// job manager and runner, upkeep and the HTTP API) and runs them for the
// daemon's lifetime: socket activation or its own Unix socket, an optional
// TCP listener, systemd notify and watchdog, and an orderly shutdown.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/wsched/wsched/daemon/connlimit"
	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/daemon/store"
	"github.com/wsched/wsched/daemon/upkeep"
	"github.com/wsched/wsched/enforce"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/jobs/runner"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
	"github.com/wsched/wsched/plugins/host"
)

// Options configures a Daemon. Only Config is required.
type Options struct {
	Config *config.Config
	Log    *slog.Logger
	// Version is reported by GET /v1/status.
	Version string
	// Provider overrides the inventory the config selects (tests).
	Provider inventory.Provider
	// Listener overrides socket activation and the configured socket (tests).
	Listener net.Listener
	// Facts, when set, adjusts the host facts the enforcement tiers are
	// chosen from (tests: an R615 host with the dmem controller and a fake
	// NVML library).
	Facts func(enforce.Facts) enforce.Facts
	// UnsafeNoFsync writes the lease journal without fsync (measurements
	// only: a crash can forget granted leases).
	UnsafeNoFsync bool
}

// Daemon is a running wsched serve.
type Daemon struct {
	cfg      *config.Config
	log      *slog.Logger
	version  string
	procRoot string
	facts    func(enforce.Facts) enforce.Facts // Options.Facts

	provider inventory.Provider
	db       *store.DB
	watch    *procwatch.Watcher
	est      *estimator.Estimator
	eng      *placement.Engine
	upkeep   *upkeep.Upkeep
	host     *host.Host
	jobs     *jobs.Manager
	split    *splitter // cuts long jobs ([jobs] chunk_over)
	enforce  enforcement

	conns      *connlimit.Counter // open connections, per uid (serve)
	listener   net.Listener
	socket     string
	tcpAddr    string // the TCP listener's address, when configured
	activated  bool
	started    time.Time
	lastStatus string      // the last STATUS= line sent to systemd (upkeep's goroutine)
	ready      atomic.Bool // READY=1 has been sent
}

// New opens the inventory, the state database and the process watcher and
// builds the components. Nothing runs or listens until Run.
func New(opts Options) (*Daemon, error) {
	cfg := opts.Config
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{cfg: cfg, log: log, version: opts.Version, procRoot: "/proc", listener: opts.Listener, started: time.Now(), facts: opts.Facts}
	if err := d.open(opts.Provider); err != nil {
		d.close()
		return nil, err
	}
	d.db.SetUnsafeNoFsync(opts.UnsafeNoFsync)
	reader := inventory.NewReader(d.provider, cfg.Inventory.MaxAge.D(), nil)
	d.est = estimator.New(estimator.Config{CUDAContextBytes: cfg.Estimator.CUDAContext.Int64()}, d.db)
	d.eng = placement.New(placement.Options{
		Placement: cfg.Placement, Leases: cfg.Leases, Inventory: reader, Store: d.db, Log: log, Signal: d.terminate,
		BorrowGrace: cfg.Enforcement.ReclaimGrace.D(),
	})
	d.upkeep = upkeep.New(upkeep.Options{
		Engine: d.eng, Store: d.db, Watcher: d.watch, Reader: reader, Every: cfg.Inventory.RefreshInterval.D(),
		AfterTick: d.updateStatus, Log: log, ProcRoot: d.procRoot,
	})
	if cfg.Leases.Overrun == placement.OverrunKill && !canKillOthers() {
		log.Warn(`[leases] overrun = "kill" cannot signal other users' processes: the daemon has neither uid 0 nor CAP_KILL; `+
			`overruns will only be reported (grant it with AmbientCapabilities=CAP_KILL in a drop-in)`, "uid", os.Getuid())
	}
	d.enforce = d.newEnforcement()
	d.host = d.newHost()
	run := runner.New(runner.Options{
		Models: cfg.Models, Backends: d.host, Sizer: runner.NewSizer(d.est, d.eng), Learn: d.db, Log: log,
		Bounds: runner.ResultBounds{Segments: cfg.Jobs.MaxSegments, Bytes: int64(cfg.Jobs.MaxResultBytes)},
	})
	d.jobs = jobs.New(jobs.Config{
		MaxRetries: cfg.Jobs.MaxRetries, JobTimeout: cfg.Jobs.Timeout.D(),
		ResultTTL: cfg.Jobs.ResultTTL.D(), MaxActive: cfg.Jobs.MaxActive, MaxJobs: cfg.Jobs.MaxJobs,
		UIDLimits:   jobs.OwnerLimits{Active: cfg.Limits.ActiveJobs, Stored: cfg.Limits.StoredJobs},
		TokenLimits: jobs.OwnerLimits{Active: cfg.Limits.TokenActiveJobs, Stored: cfg.Limits.TokenStoredJobs},
	}, run, d.db, log)
	d.jobs.SetOrder(cfg.Jobs.MaxReorderWait.D(), d.gpuModel)
	d.split = &splitter{dir: chunksDir(cfg), vad: run.VADOn, log: log}
	d.jobs.SetChunking(cfg.Jobs.ChunkOver.D(), d.split)
	d.jobs.SetShortReserve(cfg.Jobs.ShortReserve, cfg.Jobs.ShortAudio.D())
	return d, nil
}

// open opens the inventory (unless given), the state database and the
// process watcher.
func (d *Daemon) open(provider inventory.Provider) error {
	d.provider = provider
	if d.provider == nil {
		p, _, err := inventory.Open(d.cfg.Inventory, d.log)
		if err != nil {
			return err
		}
		d.provider = p
	}
	var err error
	if d.db, err = store.OpenLogged(d.cfg.Daemon.StateDir, d.log); err != nil {
		return err
	}
	d.watch, err = procwatch.NewWatcher(d.log)
	return err
}

func (d *Daemon) close() {
	d.enforce.close(d.log)
	if d.db != nil {
		_ = d.db.Close()
	}
	if d.provider != nil {
		_ = d.provider.Close()
	}
}

// Run serves until ctx ends, then shuts down gracefully: the sockets stop
// accepting, streams end, running jobs are interrupted (they resume at the
// next start), backends stop and release their leases, the engine stops;
// leases and jobs stay in the database.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.close()
	ln, err := d.listen()
	if err != nil {
		return err
	}
	tcp, err := d.listenTCP()
	if err != nil {
		ln.Close()
		return err
	}
	bg := newBackground(ctx)
	bg.run(func(c context.Context) { _ = d.eng.Run(c) })
	bg.run(func(c context.Context) {
		if err := d.watch.Run(c); err != nil {
			d.log.Error("process watcher stopped", "err", err)
		}
	})
	if err := d.upkeep.Recover(ctx); err != nil {
		bg.stop()
		closeAll(ln, tcp)
		return err
	}
	if err := d.discoverBackends(ctx); err != nil {
		bg.stop()
		closeAll(ln, tcp)
		return err
	}
	bg.run(d.upkeep.Run)
	bg.run(d.watchdog)
	stopHost := d.start(bg.ctx, "plugin host", d.host.Run)
	stopHangup := d.start(bg.ctx, "SIGHUP handler", d.rediscoverOnHangup())
	d.split.removeChunks()
	stopJobs := d.start(bg.ctx, "job manager", d.jobs.Run)
	api := d.api()
	if err := api.RemoveOrphanUploads(ctx); err != nil { // before any upload begins
		d.log.Warn("orphan uploads not removed", "err", err)
	}
	stopMetrics := d.start(bg.ctx, "metrics", api.RunMetrics)
	stopEvents := d.start(bg.ctx, "event streams", api.RunEvents)
	stopTrace := d.start(bg.ctx, "trace recorder", api.RunTrace)
	srv := d.serve(api, ln, tcp)
	d.notifyReady()

	select {
	case <-ctx.Done():
	case err = <-srv.errs:
		d.log.Error("HTTP server stopped", "err", err)
	}
	d.notify("STOPPING=1")
	d.log.Info("shutting down")
	srv.shutdown()
	stopMetrics()
	stopEvents()
	stopTrace()
	stopJobs()
	stopHangup()
	stopHost() // backends stop and their leases are released while the engine runs
	bg.stop()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

func closeAll(ls ...net.Listener) {
	for _, l := range ls {
		if l != nil {
			l.Close()
		}
	}
}
