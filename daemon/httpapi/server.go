// Package httpapi is wsched's HTTP/JSON API: the handlers of /v1/leases,
// /v1/jobs, the OpenAI-compatible endpoints, views, events and metrics, with
// request decoding, client identity (SO_PEERCRED) and access checks. It
// reaches the engine, the job manager, the backends and the estimator
// through the narrow interfaces below; it owns no state of its own.
package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/plugins/descriptor"
	"github.com/wsched/wsched/plugins/host"
)

// Engine is the placement engine as the API uses it (*placement.Engine).
type Engine interface {
	Acquire(ctx context.Context, req placement.Request) (placement.Lease, error)
	Get(ctx context.Context, id string) (placement.Lease, error)
	RenewAs(ctx context.Context, id string, ttl time.Duration, may placement.Guard) (placement.Lease, error)
	ReleaseAs(ctx context.Context, id, reason string, may placement.Guard) (placement.Lease, error)
	AddProcessAs(ctx context.Context, id string, pid int, startTicks uint64, may placement.Guard) (placement.Lease, error)
	ReportUsageAs(ctx context.Context, id string, u placement.Usage, may placement.Guard) (placement.Lease, error)
	Subscribe(ctx context.Context, types ...placement.EventType) (<-chan placement.Event, func(), error)
	View() placement.View
	Preview(bytes int64, dev device.Spec, prio placement.Priority) placement.Preview
	Summary() placement.Summary
	Accounts() ([]placement.Account, string)
	Ping(ctx context.Context) error
}

// Jobs is the job manager as the API uses it (*jobs.Manager).
type Jobs interface {
	Submit(ctx context.Context, spec jobs.Spec) (jobs.Job, error)
	Admit(ctx context.Context, uid int) error
	Get(ctx context.Context, id string) (jobs.Job, error)
	List(ctx context.Context) ([]jobs.Job, error)
	Cancel(ctx context.Context, id string) (jobs.Job, error)
	Delete(ctx context.Context, id string) (jobs.Job, bool, error)
	Wait(ctx context.Context, id string) (jobs.Job, error)
	Subscribe(ctx context.Context, id string) (jobs.Job, <-chan jobs.Event, func(), error)
	Watch(ctx context.Context) (<-chan jobs.Event, func(), error)
}

// Backends reports the plugin host's backends and instances (*host.Host).
type Backends interface {
	Status(ctx context.Context) (host.Status, error)
	// Descriptors are the discovered backends' descriptors.
	Descriptors(ctx context.Context) (descriptor.Set, error)
}

// Estimator sizes models against the machine's GPUs (*runner.Sizer).
type Estimator interface {
	// Estimate answers req for the GPUs it names, or every GPU when none.
	Estimate(req estimator.Request) (estimator.Result, error)
	// EstimateAnyGPU recommends the size that fits the model on any GPU.
	EstimateAnyGPU(req estimator.Request) (estimator.Result, error)
}

// Learned is what the estimator has learned from measurements (*store.DB):
// POST /v1/estimator/samples shows it.
type Learned interface {
	Peaks(k estimator.Key) ([]int64, error)
	Contexts(key string) ([]int64, error)
}

// Watcher watches processes whose exit ends or shrinks a lease, and knows
// who they are: Lookup reads /proc once per process and caches it while the
// process lives (*procwatch.Watcher).
type Watcher interface {
	Watch(pid int) error
	Lookup(procRoot string, pid int) (procwatch.Info, error)
	Leader(pid int) bool
}

var (
	_ Engine   = (*placement.Engine)(nil)
	_ Jobs     = (*jobs.Manager)(nil)
	_ Backends = (*host.Host)(nil)
)

// Info is what GET /v1/status reports about the daemon itself.
type Info struct {
	Version         string
	Started         time.Time
	Socket          string
	SocketActivated bool
}

// Options configures a Server. All fields but Log and ProcRoot are required.
type Options struct {
	Config    *config.Config
	Engine    Engine
	Jobs      Jobs
	Backends  Backends
	Estimator Estimator
	// Learned, when set, answers POST /v1/estimator/samples.
	Learned Learned
	Watcher Watcher
	Info    Info
	Log     *slog.Logger
	// ProcRoot is where /proc is mounted (default "/proc").
	ProcRoot string
	// Enforcer, when set, is each GPU's enforcement tier: shown on
	// /v1/gpus and /v1/status, its variables added to a granted lease's env.
	Enforcer Enforcer
	// OnPID, when set, is told of each process added to a lease (POST
	// /v1/leases/{id}/pids): the nvml-limits tier sets the driver's limits
	// on a `wsched run` child's cgroup.
	OnPID func(l placement.Lease, pid int)
}

// Server serves the API.
type Server struct {
	cfg      *config.Config
	eng      Engine
	jobs     Jobs
	backends Backends
	est      Estimator
	learned  Learned
	watch    Watcher
	info     Info
	log      *slog.Logger
	procRoot string
	metrics  *metrics
	hub      *hub      // the event streams' one engine subscription
	spool    spoolBook // spool bytes reserved for uploads in progress
	keys     keyed     // idempotency keys of lease requests under way
	enforcer Enforcer
	onPID    func(placement.Lease, int)
	trace    *traceRecorder // lease events for GET /v1/jobs/trace (RunTrace)
}

// New returns the API over opts' components.
func New(opts Options) *Server {
	s := &Server{
		cfg: opts.Config, eng: opts.Engine, jobs: opts.Jobs, backends: opts.Backends, est: opts.Estimator, learned: opts.Learned,
		watch: opts.Watcher, info: opts.Info, log: opts.Log, procRoot: opts.ProcRoot, enforcer: opts.Enforcer,
		onPID: opts.OnPID,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.procRoot == "" {
		s.procRoot = "/proc"
	}
	s.metrics = newMetrics(s.eng, s.jobs)
	s.hub = newHub(s.eng, s.cfg.Limits.Subscribers, s.cfg.Limits.TokenSubscribers)
	s.trace = newTraceRecorder()
	return s
}

// Handler is the whole API, for the Unix socket (serve it with
// ConnContext: PeerContext).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/gpus", s.getGPUs)
	mux.HandleFunc("GET /v1/status", s.getStatus)
	mux.HandleFunc("POST /v1/leases", s.postLease)
	mux.HandleFunc("GET /v1/leases", s.listLeases)
	mux.HandleFunc("GET /v1/leases/{id}", s.getLease)
	mux.HandleFunc("DELETE /v1/leases/{id}", s.deleteLease)
	mux.HandleFunc("POST /v1/leases/{id}/renew", s.renewLease)
	mux.HandleFunc("POST /v1/leases/{id}/pids", s.addLeasePID)
	mux.HandleFunc("POST /v1/leases/{id}/usage", s.postUsage)
	mux.HandleFunc("GET /v1/events", s.events)
	mux.HandleFunc("POST /v1/estimate", s.postEstimate)
	mux.HandleFunc("POST /v1/estimator/samples", s.postSamples)
	mux.HandleFunc("GET /v1/backends", s.getBackends)
	mux.HandleFunc("POST /v1/jobs", s.postJob)
	mux.HandleFunc("GET /v1/jobs", s.listJobs)
	mux.HandleFunc("GET /v1/jobs/{id}", s.getJob)
	mux.HandleFunc("GET /v1/jobs/trace", s.getTrace)
	mux.HandleFunc("DELETE /v1/jobs/{id}", s.deleteJob)
	mux.HandleFunc("GET /v1/jobs/{id}/events", s.jobEvents)
	mux.HandleFunc("POST /v1/audio/transcriptions", s.openAITranscription(false))
	mux.HandleFunc("POST /v1/audio/translations", s.openAITranscription(true))
	mux.HandleFunc("GET /v1/models", s.listModels)
	mux.HandleFunc("GET /v1/models/registry", s.getRegistry)
	mux.HandleFunc("POST /v1/placement/preview", s.postPreview)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /v1/monitor/events", s.monitorEvents)
	mux.Handle("GET /{$}", monitorPage())
	mux.Handle("GET /ui/", monitorPage())
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &httpError{status: http.StatusNotFound, code: "not_found", err: fmt.Errorf("no route for %s %s", r.Method, r.URL.Path)})
	})
	return s.deadlines(s.metrics.instrument(prettyJSON(mux)))
}
