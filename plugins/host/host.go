package host

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/wsched/wsched/internal/cgroup"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/placement"
)

// Leaser grants, renews and releases GPU memory; *placement.Engine is one.
type Leaser interface {
	Acquire(ctx context.Context, req placement.Request) (placement.Lease, error)
	Release(ctx context.Context, id, reason string) (placement.Lease, error)
	Renew(ctx context.Context, id string, ttl time.Duration) (placement.Lease, error)
	AddPID(ctx context.Context, id string, pid int) (placement.Lease, error)
	RemovePID(ctx context.Context, id string, pid int) (placement.Lease, error)
	SetReclaimable(ctx context.Context, id string, on bool) (placement.Lease, error)
	Resize(ctx context.Context, id string, bytes int64) (placement.Lease, error)
	Subscribe(ctx context.Context, types ...placement.EventType) (<-chan placement.Event, func(), error)
}

var _ Leaser = (*placement.Engine)(nil)

// Options configures a Host. Config and Leases are required.
type Options struct {
	Config config.Backends
	Leases Leaser
	// Holder holds the instances' leases: the daemon's own process.
	// Default: this process.
	Holder placement.Holder
	// LeaseTTL is the TTL of instance leases; the host renews them every
	// third of it. Default: 60s.
	LeaseTTL time.Duration
	// Log receives the host's decisions and, tagged backend=… lease=…, the
	// backends' own log lines.
	Log *slog.Logger
	// Environ is the environment a backend starts from, before the lease's
	// variables are added (os.Environ when nil).
	Environ func() []string
	// OnEvent, when set, is called (synchronously) with every start, crash,
	// restart and stop. It must not call back into the Host.
	OnEvent func(Event)
	// Sampler, when set, is asked to read the GPUs right after a backend
	// has loaded its model and right after each Transcribe, so the lease
	// sees (and learning keeps) peaks the periodic reading would miss.
	Sampler Sampler
	// Cgroups, when set, gives each backend a cgroup of its own: the
	// backend and everything it starts (the exec backend's app, children
	// that setsid) is killed with the instance (issue 27).
	Cgroups *cgroup.Manager
	// Enforce, when set, adds the lease's enforcement tier's variables to
	// the backend's environment (enforce.Enforcer.Env: LD_PRELOAD of the
	// allocation cap, or the MPS limit).
	Enforce func(placement.Lease) map[string]string
	// Limits, when set, is given each backend's cgroup directory before the
	// backend starts: it sets the driver's memory limits for the lease there
	// (the nvml-limits tier) and returns what clears them, which runs
	// before the cgroup is removed (nil: nothing to clear).
	Limits func(l placement.Lease, cgroupDir string) (clear func())
}

// Sampler reads the GPUs now and hands the reading to the engine
// (*upkeep.Upkeep).
type Sampler interface {
	Sample(ctx context.Context) error
}

// StartSampler is a Sampler that also reads the GPUs right after a backend
// process has started under a GPU lease, before it loads anything: what the
// process holds then is its bare CUDA context, learned per GPU model and
// driver (*upkeep.Upkeep).
type StartSampler interface {
	SampleStart(ctx context.Context, leaseID string) error
}

// Host runs backends. Create it with New and start Run.
type Host struct {
	opts Options
	dirs []string
	log  *slog.Logger
	uid  int
	ttl  time.Duration
	kick chan struct{} // wakes Run; buffered 1
	bg   sync.WaitGroup

	mu      sync.Mutex
	workers map[string]*worker
	changed chan struct{} // closed and replaced when a worker turns idle or goes
	nextID  int
	stopped bool
	waiting map[key][]int64   // sizes of the loads waiting for memory, by key
	forming map[key]forming   // instances of shared keys being started (streams.go)
	probes  map[string]probe  // Info answers by path
	logged  map[string]string // refusal reasons already logged, by path

	descs descriptors // the backends' descriptors (Rescan)
}

// New returns a host; nothing runs until Run.
func New(opts Options) *Host {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ
	}
	if opts.Holder.PID == 0 {
		opts.Holder = placement.Holder{PID: os.Getpid(), UID: os.Getuid(), Name: "wsched"}
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = time.Minute
	}
	return &Host{
		opts: opts, log: opts.Log, uid: os.Geteuid(), ttl: opts.LeaseTTL,
		dirs:    absDirs(append([]string{opts.Config.PluginDir}, opts.Config.DevDirs...)...),
		kick:    make(chan struct{}, 1),
		workers: map[string]*worker{}, changed: make(chan struct{}), waiting: map[key][]int64{}, forming: map[key]forming{},
		probes: map[string]probe{}, logged: map[string]string{},
	}
}

// Dirs are the directories searched for backends, in order.
func (h *Host) Dirs() []string { return h.dirs }

// Run expires idle instances, renews leases and health-checks idle
// backends until ctx ends; then it stops every instance and releases its
// lease. Acquire fails with ErrStopped afterwards.
func (h *Host) Run(ctx context.Context) error {
	h.scan()
	h.background(func() { h.watchReclaims(ctx) })
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.shutdown()
			return nil
		case <-t.C:
		case <-h.kick:
		}
		t.Reset(h.maintain(ctx))
	}
}

// wake makes Run look at the deadlines again.
func (h *Host) wake() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// broadcast tells waiting Acquires that a worker turned idle or went.
// Call with h.mu held.
func (h *Host) broadcast() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// awaitChange waits, with h.mu held (released while waiting), for the next
// broadcast or the end of ctx.
func (h *Host) awaitChange(ctx context.Context) {
	changed := h.changed
	h.mu.Unlock()
	select {
	case <-changed:
	case <-ctx.Done():
	}
	h.mu.Lock()
}

// maintain does what is due and returns the time until the next deadline.
func (h *Host) maintain(ctx context.Context) time.Duration {
	now := time.Now()
	next := now.Add(h.opts.Config.HealthInterval.D())
	var expired, renew, check []*worker
	h.mu.Lock()
	for _, w := range h.workers {
		if w.state == StateIdle && !now.Before(w.expires) {
			w.state = StateStopping
			expired = append(expired, w)
			continue
		}
		if w.state != StateStopping && !now.Before(w.renewAt) {
			w.renewAt = now.Add(h.ttl / 3)
			renew = append(renew, w)
		}
		if w.state == StateIdle && !now.Before(w.healthAt) {
			w.healthAt = now.Add(h.opts.Config.HealthInterval.D())
			w.state = StateChecking
			check = append(check, w)
		}
		next = earliest(next, w.renewAt)
		if w.state == StateIdle {
			next = earliest(next, w.expires, w.healthAt)
		}
	}
	h.mu.Unlock()
	for _, w := range expired {
		h.background(func() { h.drop(w, "keep-alive expired") })
	}
	for _, w := range renew {
		h.renew(ctx, w)
	}
	for _, w := range check {
		h.background(func() { h.healthCheck(ctx, w) })
	}
	return max(time.Until(next), time.Millisecond)
}

func earliest(t time.Time, more ...time.Time) time.Time {
	for _, m := range more {
		if !m.IsZero() && m.Before(t) {
			t = m
		}
	}
	return t
}

// background runs f on its own goroutine; shutdown waits for it.
func (h *Host) background(f func()) {
	h.bg.Add(1)
	go func() { defer h.bg.Done(); f() }()
}

// renew extends a worker's lease. A lease that ended under the worker (an
// operator released it, or it expired) means its memory is no longer
// reserved: the worker is given up and its process stopped.
func (h *Host) renew(ctx context.Context, w *worker) {
	_, err := h.opts.Leases.Renew(ctx, w.lease.ID, h.ttl)
	if err == nil || ctx.Err() != nil {
		return
	}
	w.log.Warn("cannot renew the lease of a backend", "err", err)
	if leaseGone(err) {
		h.loseLease(w, fmt.Errorf("%w: lease %s: %w", ErrGivenUp, w.lease.ID, err))
	}
}

// shutdown stops every worker, whoever holds it, and waits for background
// work.
func (h *Host) shutdown() {
	h.mu.Lock()
	h.stopped = true
	var all []*worker
	for _, w := range h.workers {
		if w.state != StateStopping {
			w.state = StateStopping
			all = append(all, w)
		}
	}
	h.broadcast()
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range all {
		wg.Add(1)
		go func() { defer wg.Done(); h.drop(w, "plugin host shutting down") }()
	}
	wg.Wait()
	h.bg.Wait()
}
