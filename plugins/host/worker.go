package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/plugins"
)

// State of an instance.
type State string

// Instance states. Only an idle instance may be handed out, health-checked
// or expired; the others belong to whoever set them.
const (
	StateStarting   State = "starting"   // process starting, model loading
	StateIdle       State = "idle"       // warm, waiting for a caller
	StateBusy       State = "busy"       // checked out by a caller
	StateChecking   State = "checking"   // health check running
	StateRestarting State = "restarting" // crashed; a new process is starting
	StateStopping   State = "stopping"   // being unloaded, lease being released
)

// worker is one backend process with a model loaded, under its own lease.
// The fields below mu are guarded by Host.mu.
type worker struct {
	id        string
	key       key
	spec      Spec
	bin       Binary
	lease     placement.Lease
	keepAlive time.Duration
	log       *slog.Logger

	state    State
	proc     *process
	info     plugins.Info
	memory   plugins.MemoryReport
	started  time.Time
	lastUsed time.Time
	expires  time.Time // idle: when keep-alive ends
	renewAt  time.Time
	healthAt time.Time
	restarts int
	failed   error  // set once the worker is given up
	discard  string // set by Discard: drop at check-in, for this reason

	// Streams (streams.go): callers holding the instance now, the most it
	// takes, the most it has had at once, and its lease's size now (the
	// granted w.lease.Bytes is the first stream's).
	streams, maxStreams, peakStreams int
	bytes                            int64
	grown                            []int64 // what each stream after the first added to the lease
	sizeUnsure                       bool    // a resize failed in a way that may have taken effect: bytes may be wrong

	markMu sync.Mutex // serializes syncReclaimable
	marked bool       // the engine has the lease as reclaimable
	sizeMu sync.Mutex // serializes syncSize
}

// key says which warm instances can serve a spec: same backend, model,
// load options and device request.
type key struct {
	backend, model, options, device string
}

func keyOf(s Spec) key {
	var b strings.Builder
	fmt.Fprintf(&b, "threads=%d flash_attention=%t vad=%q", s.Load.Threads, s.Load.FlashAttention, s.Load.VADModelPath)
	for _, k := range slices.Sorted(maps.Keys(s.Load.Extra)) {
		fmt.Fprintf(&b, " %q=%q", k, s.Load.Extra[k])
	}
	return key{backend: s.Backend, model: s.Load.ModelPath, options: b.String(), device: s.Device.String()}
}

// Instance is a warm backend checked out to one caller by Acquire (one
// stream of it, when its spec allows several: streams.go). Its methods may
// be called until the release function from Acquire runs; after that they
// fail with ErrReleased.
type Instance struct {
	h        *Host
	w        *worker
	added    int64 // what this stream's joining added to the lease (0: it started the instance or took it warm)
	mu       sync.Mutex
	released bool
}

// ID names the instance (as in Status).
func (i *Instance) ID() string { return i.w.id }

// Backend is the backend's name.
func (i *Instance) Backend() string { return i.w.bin.Name }

// Lease is the instance's lease: its ID, GPU and size now (the first
// stream's size grown by the streams it serves).
func (i *Instance) Lease() placement.Lease {
	i.h.mu.Lock()
	defer i.h.mu.Unlock()
	l := i.w.lease
	l.Bytes = i.w.bytes
	return l
}

// StreamBytes is what this caller's stream added to the lease: 0 for the
// stream that started the instance (or took it warm), one stream's
// estimate for a caller that joined it (streams.go).
func (i *Instance) StreamBytes() int64 { return i.added }

// Streams is how many callers the instance serves now.
func (i *Instance) Streams() int {
	i.h.mu.Lock()
	defer i.h.mu.Unlock()
	return i.w.streams
}

// Memory is what the backend reported it allocated when it last loaded
// the model (after a restart: the reload's report).
func (i *Instance) Memory() plugins.MemoryReport {
	i.h.mu.Lock()
	defer i.h.mu.Unlock()
	return i.w.memory
}

// Info is the running backend's own description.
func (i *Instance) Info() plugins.Info {
	i.h.mu.Lock()
	defer i.h.mu.Unlock()
	return i.w.info
}

// PID is the backend process's ID (it changes when the backend restarts).
func (i *Instance) PID() int {
	i.h.mu.Lock()
	defer i.h.mu.Unlock()
	if i.w.proc == nil {
		return 0
	}
	return i.w.proc.pid
}

// Restarts counts the crashes the instance has recovered from.
func (i *Instance) Restarts() int {
	i.h.mu.Lock()
	defer i.h.mu.Unlock()
	return i.w.restarts
}

// Discard asks for the instance to be stopped, and its lease released, when
// it is released instead of staying warm (a cancelled job: the backend's
// state after an aborted call is not worth keeping).
func (i *Instance) Discard(reason string) {
	i.h.mu.Lock()
	defer i.h.mu.Unlock()
	if i.w.discard == "" {
		i.w.discard = reason
	}
}

// release hands the instance back once.
func (i *Instance) release() {
	i.mu.Lock()
	done := i.released
	i.released = true
	i.mu.Unlock()
	if !done {
		i.h.checkin(i.w)
	}
}

// current returns the process to call, or why there is none.
func (i *Instance) current() (*process, error) {
	i.mu.Lock()
	released := i.released
	i.mu.Unlock()
	if released {
		return nil, fmt.Errorf("host: instance %s: %w", i.w.id, ErrReleased)
	}
	i.h.mu.Lock()
	defer i.h.mu.Unlock()
	switch {
	case i.w.failed != nil:
		return nil, fmt.Errorf("host: instance %s: %w: %w", i.w.id, plugins.ErrUnavailable, i.w.failed)
	case i.w.proc == nil || i.w.state == StateStopping:
		return nil, fmt.Errorf("host: instance %s: %w: backend stopped", i.w.id, plugins.ErrUnavailable)
	}
	return i.w.proc, nil
}

// crashedErr reports whether err from a call means the backend is gone.
func crashedErr(p *process, err error) bool {
	return errors.Is(err, plugins.ErrUnavailable) || p.exited()
}

// Transcribe decodes one audio file on the backend, streaming its events to
// emit. If the backend dies (or answers plugins.ErrUnavailable) during the
// call, the host restarts it under the same lease and reloads the model
// before returning the error, which unwraps to plugins.ErrUnavailable; a
// second call then runs on the new process. Progress and segments are
// repaired on the way in (sanitizer): no NaN, ±Inf or negative time passes.
func (i *Instance) Transcribe(ctx context.Context, req plugins.TranscribeRequest, emit func(plugins.Event) error) (plugins.Result, error) {
	i.h.mu.Lock()
	i.h.awaitRestart(ctx, i.w) // another stream's call is restarting the backend: use the new process
	i.h.mu.Unlock()
	p, err := i.current()
	if err != nil {
		return plugins.Result{}, err
	}
	san := &sanitizer{log: i.w.log}
	res, err := p.backend.Transcribe(ctx, req, san.emit(emit))
	i.h.sample(ctx, i.w, "transcribe")
	if err == nil {
		san.result(&res)
		return res, nil
	}
	if crashedErr(p, err) {
		i.h.crashed(ctx, i.w, p, "transcribe", err)
	}
	return plugins.Result{}, fmt.Errorf("host: transcribe %s on backend %s (lease %s): %w", req.AudioPath, i.w.bin.Name, i.w.lease.ID, err)
}
