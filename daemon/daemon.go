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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/daemon/store"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/jobs"
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
	jobs     *jobs.Manager

	listener  net.Listener
	socket    string
	tcpAddr   string // the TCP listener's address, when configured
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
	if cfg.Leases.Overrun == placement.OverrunKill && !canKillOthers() {
		log.Warn(`[leases] overrun = "kill" cannot signal other users' processes: the daemon has neither uid 0 nor CAP_KILL; `+
			`overruns will only be reported (grant it with AmbientCapabilities=CAP_KILL in a drop-in)`, "uid", os.Getuid())
	}
	d.host = d.newHost()
	d.jobs = jobs.New(jobs.Config{
		MaxRetries: cfg.Jobs.MaxRetries, JobTimeout: cfg.Jobs.Timeout.D(),
		ResultTTL: cfg.Jobs.ResultTTL.D(), MaxActive: cfg.Jobs.MaxActive,
	}, executor{d}, db, log)
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
	if err := d.recover(ctx); err != nil {
		bg.stop()
		closeAll(ln, tcp)
		return err
	}
	for _, f := range []func(context.Context){d.pumpExits, d.pumpEvents, d.refreshLoop, d.watchdog} {
		bg.run(f)
	}
	stopHost := d.startHost(bg.ctx)
	stopJobs := d.startJobs(bg.ctx)
	srv := d.serve(ln, tcp)
	d.notifyReady()

	select {
	case <-ctx.Done():
	case err = <-srv.errs:
		d.log.Error("HTTP server stopped", "err", err)
	}
	d.notify("STOPPING=1")
	d.log.Info("shutting down")
	srv.shutdown()
	stopJobs()
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

// background runs the daemon's own goroutines until stop.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newBackground(parent context.Context) *background {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	return &background{ctx: ctx, cancel: cancel}
}

func (b *background) run(f func(context.Context)) {
	b.wg.Add(1)
	go func() { defer b.wg.Done(); f(b.ctx) }()
}

func (b *background) stop() {
	b.cancel()
	b.wg.Wait()
}

// servers are the HTTP servers on the Unix socket and the optional TCP
// listener.
type servers struct {
	base context.CancelFunc
	list []*http.Server
	errs chan error
}

// serve starts serving the API on the Unix socket and, with a bearer token,
// on the TCP listener.
func (d *Daemon) serve(unix, tcp net.Listener) *servers {
	baseCtx, cancel := context.WithCancel(context.Background())
	s := &servers{base: cancel, errs: make(chan error, 2)}
	handler := d.routes()
	start := func(ln net.Listener, h http.Handler, conn func(context.Context, net.Conn) context.Context) {
		srv := &http.Server{
			Handler: h, ConnContext: conn, ReadHeaderTimeout: 10 * time.Second,
			BaseContext: func(net.Listener) context.Context { return baseCtx },
			ErrorLog:    slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
		}
		s.list = append(s.list, srv)
		go func() { s.errs <- srv.Serve(ln) }()
	}
	start(unix, handler, peerContext)
	if tcp != nil {
		start(tcp, requireToken(d.cfg.Daemon.HTTPToken, handler), peerContext)
	}
	return s
}

// shutdown ends streams and long polls, then waits up to 5 s for requests.
func (s *servers) shutdown() {
	s.base()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range s.list {
		_ = srv.Shutdown(ctx)
	}
}

// startJobs runs the job manager; the returned function stops it and waits.
func (d *Daemon) startJobs(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.jobs.Run(ctx); err != nil {
			d.log.Error("job manager stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }
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
	mux.HandleFunc("POST /v1/jobs", d.postJob)
	mux.HandleFunc("GET /v1/jobs", d.listJobs)
	mux.HandleFunc("GET /v1/jobs/{id}", d.getJob)
	mux.HandleFunc("DELETE /v1/jobs/{id}", d.cancelJob)
	mux.HandleFunc("GET /v1/jobs/{id}/events", d.jobEvents)
	mux.HandleFunc("POST /v1/audio/transcriptions", d.openAITranscription(false))
	mux.HandleFunc("POST /v1/audio/translations", d.openAITranscription(true))
	mux.HandleFunc("GET /v1/models", d.listModels)
	mux.HandleFunc("GET /healthz", d.healthz)
	mux.Handle("GET /metrics", d.metrics.handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &httpError{status: http.StatusNotFound, code: "not_found", err: fmt.Errorf("no route for %s %s", r.Method, r.URL.Path)})
	})
	return d.metrics.instrument(mux)
}

// canKillOthers reports whether the daemon may signal processes of other
// users: root, or CAP_KILL in its effective set (bit 5 of CapEff).
func canKillOthers() bool {
	if os.Getuid() == 0 {
		return true
	}
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
			return err == nil && caps&(1<<5) != 0
		}
	}
	return false
}
