package host

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/plugins"
)

// Lease labels the host sets on its leases.
const (
	LabelBackend = "wsched.backend"
	LabelModel   = "wsched.model"
)

// Spec says which backend to run with which model, where, and for how long
// to keep it warm.
type Spec struct {
	// Backend is NAME of the executable wsched-backend-NAME.
	Backend string
	// Load names the model (an absolute path) and the options that shape
	// its memory. Load.Device is ignored: the host sets it to what the
	// backend sees under its lease, cuda:0 or cpu.
	Load plugins.LoadRequest
	// MemoryBytes is the lease's size: the caller's estimate (or measure)
	// for the model and one decoding state. Required unless Device is cpu.
	MemoryBytes int64
	// MaxStreams is how many callers of this spec one instance serves at
	// once (<= 1: one); StreamBytes is what each caller after the first
	// adds to its lease (the estimator's per-stream part; 0: MemoryBytes).
	// See streams.go.
	MaxStreams  int
	StreamBytes int64
	// Device is auto, a GPU (index or UUID) or cpu.
	Device   device.Spec
	Priority placement.Priority
	// KeepAlive is how long the instance stays warm after release: 0 means
	// [backends] keep_alive, a negative value not at all.
	KeepAlive time.Duration
	// Wait is how long to queue for memory (0: fail at once with
	// placement.ErrNoFit, unless idle instances are being stopped to make
	// room: the engine then waits [leases] reclaim_wait for them).
	Wait time.Duration
	// Labels are added to the lease.
	Labels map[string]string
	// EstimateKey is what MemoryBytes was estimated for, carried by the
	// lease so its measured peak is learned (nil: not estimated).
	EstimateKey *estimator.Key
	// OnGranted, when set, is called once the instance has its memory (a
	// new lease granted, or a warm instance's lease taken over), before the
	// model loads: the job manager counts an attempt from there, not while
	// it waits in the queue. It must not call back into the Host.
	OnGranted func(placement.Lease)
}

// granted tells the caller its memory is granted (Spec.OnGranted).
func (s Spec) granted(l placement.Lease) {
	if s.OnGranted != nil {
		s.OnGranted(l)
	}
}

func (s Spec) validate() error {
	switch {
	case !validName(s.Backend):
		return fmt.Errorf("%w: backend name %q: want letters, digits, '-' or '_'", ErrInvalid, s.Backend)
	case !filepath.IsAbs(s.Load.ModelPath):
		return fmt.Errorf("%w: model path %q is not absolute", ErrInvalid, s.Load.ModelPath)
	case s.MemoryBytes < 0 || (s.MemoryBytes == 0 && s.Device.Kind != device.CPU):
		return fmt.Errorf("%w: memory %d bytes: want a size above 0 for a GPU", ErrInvalid, s.MemoryBytes)
	case s.Wait < 0:
		return fmt.Errorf("%w: wait %s is negative", ErrInvalid, s.Wait)
	case s.StreamBytes < 0:
		return fmt.Errorf("%w: stream memory %d bytes is negative", ErrInvalid, s.StreamBytes)
	}
	return nil
}

// Acquire returns an instance of spec's backend with its model loaded,
// checked out to the caller (alone, or as one of up to spec.MaxStreams
// callers: streams.go), and the function that hands it back (call it
// exactly when done; more calls do nothing). A warm instance of the same
// spec is reused; else a busy one with room for a stream is joined when one
// more stream fits on its GPU; otherwise a new one is started under a new
// lease. When the lease does not fit, the placement engine asks back the
// leases of idle instances (least recently used first; see reclaim.go) and
// the request waits for them, or up to spec.Wait for memory to be freed
// otherwise.
func (h *Host) Acquire(ctx context.Context, spec Spec) (*Instance, func(), error) {
	if err := spec.validate(); err != nil {
		return nil, nil, fmt.Errorf("host: acquire: %w", err)
	}
	if spec.KeepAlive == 0 {
		spec.KeepAlive = h.opts.Config.KeepAlive.D()
	}
	spec.Labels = maps.Clone(spec.Labels)
	spec.Load.Extra = maps.Clone(spec.Load.Extra)
	k := keyOf(spec)
	for {
		if inst, err := h.takeWarm(ctx, k, spec); inst != nil || err != nil {
			return inst, inst.releaser(), err
		}
		if inst := h.join(ctx, k, spec); inst != nil {
			return inst, inst.release, nil
		}
		waited, done, err := h.awaitForming(ctx, k, spec)
		if err != nil {
			return nil, nil, err
		}
		if !waited {
			defer done()
			break
		}
	}
	bin, err := h.lookup(spec.Backend)
	if err != nil {
		return nil, nil, err
	}
	return h.waitForRoom(ctx, k, spec, bin)
}

// releaser is the release function of an instance (nil for none).
func (i *Instance) releaser() func() {
	if i == nil {
		return nil
	}
	return i.release
}

// request is the lease request for an instance of spec.
func (h *Host) request(spec Spec, bin Binary, wait time.Duration) placement.Request {
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelBackend], labels[LabelModel] = bin.Name, spec.Load.ModelPath
	holder := h.opts.Holder
	holder.Name = BinaryPrefix + bin.Name
	return placement.Request{
		Bytes: spec.MemoryBytes, Device: spec.Device, Priority: spec.Priority, TTL: h.ttl, Wait: wait,
		Holder: holder, Labels: labels, EstimateKey: spec.EstimateKey,
	}
}

// lookup finds a backend by name, scanning the directories afresh.
func (h *Host) lookup(name string) (Binary, error) {
	found, _ := h.scan()
	for _, b := range found {
		if b.Name == name {
			return b, nil
		}
	}
	return Binary{}, fmt.Errorf("host: %w: no usable %s%s in %v", ErrUnknownBackend, BinaryPrefix, name, h.dirs)
}

// takeWarm checks out an idle instance of key k whose lease is large enough
// for spec; nil when there is none. An instance whose process died while
// idle is restarted first (or dropped when that fails).
func (h *Host) takeWarm(ctx context.Context, k key, spec Spec) (*Instance, error) {
	for {
		h.mu.Lock()
		if h.stopped {
			h.mu.Unlock()
			return nil, fmt.Errorf("host: acquire: %w", ErrStopped)
		}
		w := h.idleMatch(k, spec)
		h.mu.Unlock()
		if w == nil {
			return nil, nil
		}
		if p := w.proc; p.exited() { // w.proc is ours to read: we own w
			h.crashed(ctx, w, p, "acquire", errExited)
		}
		h.mu.Lock()
		failed := w.failed
		if failed != nil {
			w.state = StateStopping
		}
		h.mu.Unlock()
		if failed != nil {
			h.drop(w, "backend given up: "+failed.Error())
			continue
		}
		h.syncReclaimable(w)
		spec.granted(w.lease)
		return &Instance{h: h, w: w}, nil
	}
}

// idleMatch claims the most recently used idle instance of k that fits
// spec. Call with h.mu held.
func (h *Host) idleMatch(k key, spec Spec) *worker {
	var best *worker
	for _, w := range h.workers {
		if w.state == StateIdle && w.key == k && w.failed == nil && w.lease.Bytes >= spec.MemoryBytes &&
			(best == nil || w.lastUsed.After(best.lastUsed)) {
			best = w
		}
	}
	if best != nil {
		best.state, best.keepAlive = StateBusy, spec.KeepAlive
		best.streams, best.maxStreams = 1, max(1, spec.MaxStreams)
		best.peakStreams = max(best.peakStreams, 1)
	}
	return best
}

// waitForRoom asks the engine for spec's lease, waiting up to spec.Wait
// (and, whatever spec.Wait, for idle instances the engine asks back).
// Meanwhile an idle instance of the same key that could serve spec is taken
// instead: onReclaim leaves such instances to waiting loads.
func (h *Host) waitForRoom(ctx context.Context, k key, spec Spec, bin Binary) (*Instance, func(), error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer h.addWaiting(k, spec.MemoryBytes)()
	type granted struct {
		lease placement.Lease
		err   error
	}
	got := make(chan granted, 1)
	go func() {
		l, err := h.opts.Leases.Acquire(wctx, h.request(spec, bin, spec.Wait))
		got <- granted{l, err}
	}()
	var retry <-chan time.Time // a stream's growth may fit as other leases end
	if spec.shared() {
		t := time.NewTicker(joinRetry)
		defer t.Stop()
		retry = t.C
	}
	for {
		h.mu.Lock()
		changed := h.changed
		h.mu.Unlock()
		inst, err := h.takeWarm(ctx, k, spec)
		if inst == nil && err == nil {
			inst = h.join(ctx, k, spec)
		}
		if inst != nil || err != nil {
			cancel()
			if g := <-got; g.err == nil {
				h.releaseLease(g.lease, "not needed: a warm backend became free")
			}
			return inst, inst.releaser(), err
		}
		select {
		case <-retry:
		case g := <-got:
			if g.err != nil {
				return nil, nil, fmt.Errorf("host: lease %s for backend %s: %w", units.FormatBytes(spec.MemoryBytes), spec.Backend, g.err)
			}
			spec.granted(g.lease)
			return h.startWorker(ctx, spec, bin, g.lease)
		case <-changed:
		}
	}
}

// joinRetry is how often a load waiting for memory tries again to join a
// busy instance of its key (memory freed by leases that are not the
// host's wakes nothing here).
const joinRetry = 500 * time.Millisecond

// addWaiting records a load of key k and size bytes waiting for memory;
// the returned function removes it.
func (h *Host) addWaiting(k key, bytes int64) func() {
	h.mu.Lock()
	h.waiting[k] = append(h.waiting[k], bytes)
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if i := slices.Index(h.waiting[k], bytes); i >= 0 {
			h.waiting[k] = slices.Delete(h.waiting[k], i, i+1)
		}
		if len(h.waiting[k]) == 0 {
			delete(h.waiting, k)
		}
	}
}

// wantedByWaiter reports whether a waiting load could take w. Call with h.mu
// held.
func (h *Host) wantedByWaiter(w *worker) bool {
	return slices.ContainsFunc(h.waiting[w.key], func(b int64) bool { return b <= w.lease.Bytes })
}
