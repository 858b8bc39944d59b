// Package daemon is `wsched serve`: the placement engine behind an
// HTTP/JSON API on a Unix socket. It identifies clients by their socket
// credentials, persists leases, releases them when their holders die, keeps
// them reconciled with what NVML measures, and speaks systemd's socket
// activation, notify and watchdog protocols.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/daemon/store"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/config"
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
}

// Daemon is a running wsched serve.
type Daemon struct {
	cfg      *config.Config
	log      *slog.Logger
	version  string
	procRoot string

	provider inventory.Provider
	reader   *inventory.Reader
	eng      *placement.Engine
	db       *store.DB
	watch    *procwatch.Watcher
	est      *estimator.Estimator
	metrics  *metrics
	host     *host.Host

	listener  net.Listener
	socket    string
	activated bool
	started   time.Time
}

// New opens the inventory, the state database and the process watcher.
// Nothing listens until Run.
func New(opts Options) (*Daemon, error) {
	cfg := opts.Config
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{cfg: cfg, log: log, version: opts.Version, procRoot: "/proc", listener: opts.Listener, started: time.Now()}
	d.provider = opts.Provider
	if d.provider == nil {
		p, _, err := inventory.Open(cfg.Inventory, log)
		if err != nil {
			return nil, err
		}
		d.provider = p
	}
	db, err := store.Open(cfg.Daemon.StateDir)
	if err != nil {
		d.provider.Close()
		return nil, err
	}
	d.db = db
	if d.watch, err = procwatch.NewWatcher(log); err != nil {
		d.close()
		return nil, err
	}
	d.reader = inventory.NewReader(d.provider, cfg.Inventory.MaxAge.D(), nil)
	d.est = estimator.New(estimator.Config{CUDAContextBytes: int64(cfg.Estimator.CUDAContext)}, db)
	d.eng = placement.New(placement.Options{
		Placement: cfg.Placement, Leases: cfg.Leases, Inventory: d.reader, Store: db, Log: log,
		Signal: func(pid int) { d.terminate(pid) },
	})
	d.metrics = newMetrics(d)
	d.host = d.newHost()
	return d, nil
}

// terminate sends SIGTERM to a holder that overran its lease ([leases]
// overrun = "kill").
func (d *Daemon) terminate(pid int) {
	if isSelf(pid) {
		d.log.Warn("a backend overran its lease; the daemon holds that lease and is not terminated", "pid", pid)
		return
	}
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Signal(sigterm)
	}
	d.log.Warn("terminating holder that overran its lease", "pid", pid, "err", err)
}

func (d *Daemon) close() {
	if d.db != nil {
		_ = d.db.Close()
	}
	if d.provider != nil {
		_ = d.provider.Close()
	}
}

// Run serves until ctx ends, then shuts down gracefully: the socket stops
// accepting, streams end, the engine stops; leases stay in the database for
// the next start.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.close()
	ln, err := d.listen()
	if err != nil {
		return err
	}
	engCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	var wg sync.WaitGroup
	goRun := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(engCtx) }()
	}
	goRun(func(c context.Context) { _ = d.eng.Run(c) })
	goRun(func(c context.Context) {
		if err := d.watch.Run(c); err != nil {
			d.log.Error("process watcher stopped", "err", err)
		}
	})
	if err := d.recover(ctx); err != nil {
		stopEngine()
		wg.Wait()
		ln.Close()
		return err
	}
	goRun(d.pumpExits)
	goRun(d.pumpEvents)
	goRun(d.refreshLoop)
	goRun(d.watchdog)
	stopHost := d.startHost(engCtx)

	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv := &http.Server{
		Handler:           d.routes(),
		ConnContext:       peerContext,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	d.notifyReady()

	select {
	case <-ctx.Done():
	case err = <-serveErr:
		d.log.Error("HTTP server stopped", "err", err)
	}
	d.notify("STOPPING=1")
	d.log.Info("shutting down")
	cancelBase()
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	stopHost() // backends stop and their leases are released while the engine runs
	stopEngine()
	wg.Wait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

func (d *Daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/gpus", d.getGPUs)
	mux.HandleFunc("GET /v1/status", d.getStatus)
	mux.HandleFunc("POST /v1/leases", d.postLease)
	mux.HandleFunc("GET /v1/leases", d.listLeases)
	mux.HandleFunc("GET /v1/leases/{id}", d.getLease)
	mux.HandleFunc("DELETE /v1/leases/{id}", d.deleteLease)
	mux.HandleFunc("POST /v1/leases/{id}/renew", d.renewLease)
	mux.HandleFunc("POST /v1/leases/{id}/pids", d.addLeasePID)
	mux.HandleFunc("GET /v1/events", d.events)
	mux.HandleFunc("POST /v1/estimate", d.postEstimate)
	mux.HandleFunc("GET /v1/backends", d.getBackends)
	mux.HandleFunc("GET /healthz", d.healthz)
	mux.Handle("GET /metrics", d.metrics.handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &httpError{status: http.StatusNotFound, code: "not_found", err: fmt.Errorf("no route for %s %s", r.Method, r.URL.Path)})
	})
	return d.metrics.instrument(mux)
}
