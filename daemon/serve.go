package daemon

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/wsched/wsched/daemon/connlimit"
	"github.com/wsched/wsched/daemon/fdpass"
	"github.com/wsched/wsched/daemon/httpapi"
	"github.com/wsched/wsched/jobs/runner"
)

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

// start runs f (a component's Run) until the returned function is called,
// which cancels it and waits; an error f returns is logged under name.
func (d *Daemon) start(ctx context.Context, name string, f func(context.Context) error) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f(ctx); err != nil {
			d.log.Error(name+" stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}

// servers are the HTTP servers on the Unix socket and the optional TCP
// listener.
type servers struct {
	base context.CancelFunc
	list []*http.Server
	errs chan error
}

// api builds the HTTP API over the daemon's components.
func (d *Daemon) api() *httpapi.Server {
	return httpapi.New(httpapi.Options{
		Config: d.cfg, Engine: d.eng, Jobs: d.jobs, Backends: d.host, Estimator: runner.NewSizer(d.est, d.eng), Learned: d.db,
		Watcher: d.watch, Log: d.log, ProcRoot: d.procRoot, Enforcer: d.enforce.tiers,
		OnPID: d.enforce.limitRunPID(d.procRoot),
		Info:  httpapi.Info{Version: d.version, Started: d.started, Socket: d.socket, SocketActivated: d.activated},
	})
}

// serve starts serving the API on the Unix socket and, with a bearer token,
// on the TCP listener. Each listener has a connection budget of its own, so
// clients without the token cannot take the socket's; TCP reads headers
// (which carry the token) within the shorter tcp_header_timeout.
func (d *Daemon) serve(api *httpapi.Server, unix, tcp net.Listener) *servers {
	baseCtx, cancel := context.WithCancel(context.Background())
	s := &servers{base: cancel, errs: make(chan error, 2)}
	handler := api.Handler()
	dc := d.cfg.Daemon
	d.conns = connlimit.NewCounter(dc.MaxConnections, dc.MaxConnectionsPerUID)
	start := func(ln net.Listener, h http.Handler, headerTimeout time.Duration) {
		srv := &http.Server{
			Handler: h, ConnContext: httpapi.PeerContext,
			ReadHeaderTimeout: headerTimeout, IdleTimeout: dc.IdleTimeout.D(),
			BaseContext: func(net.Listener) context.Context { return baseCtx },
			ErrorLog:    slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
		}
		s.list = append(s.list, srv)
		go func() { s.errs <- srv.Serve(ln) }()
	}
	start(fdpass.Listen(d.conns.Listen(unix)), handler, dc.HeaderTimeout.D()) // descriptors passed with a request (wsched transcribe)
	if tcp != nil {
		tcpConns := connlimit.New(connlimit.Limits{Max: dc.TCPMaxConnections, MaxKey: "[daemon] tcp_max_connections"})
		start(tcpConns.Listen(tcp), httpapi.RequireToken(d.cfg.Daemon.HTTPToken, handler), min(dc.TCPHeaderTimeout.D(), dc.HeaderTimeout.D()))
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
