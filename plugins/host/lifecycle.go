package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/plugins"
)

// cleanupTimeout bounds the calls that tidy up after a backend (Unload,
// lease release, PID removal), which must not hang on a stuck peer.
const cleanupTimeout = 5 * time.Second

var errExited = errors.New("backend process exited")

// env is a backend's whole environment under w's lease: Options.Environ
// and, winning over it, the lease's variables (placement.Env). The caps
// fixed for the process's life (the enforcement tier's allocation cap, the
// memory fraction) are set for every stream the instance may serve: its
// lease grows by Resize after the process started (streams.go).
func (h *Host) env(w *worker) []string {
	l := w.lease
	env := h.opts.Environ()
	vars := placement.Env(l)
	h.mu.Lock()
	more := w.maxStreams - 1
	h.mu.Unlock()
	if more > 0 && l.GPU != placement.CPU && l.GPU != "" {
		l.Bytes += int64(more) * w.spec.streamBytes()
		if f, ok := placement.Env(l)["WSCHED_MEMORY_FRACTION"]; ok {
			vars["WSCHED_MEMORY_FRACTION"] = f
		}
	}
	if h.opts.Enforce != nil {
		maps.Copy(vars, h.opts.Enforce(l))
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// loadDevice is the device a backend loads onto under lease l, as it sees
// it: its one visible GPU, or the CPU.
func loadDevice(l placement.Lease) string {
	if l.GPU == placement.CPU || l.GPU == "" {
		return "cpu"
	}
	return "cuda:0"
}

// launch starts w's backend process under its lease, registers the PID
// with the lease, loads the model and asks for Info. On failure nothing of
// it is left running.
func (h *Host) launch(ctx context.Context, w *worker) (*process, plugins.Info, plugins.MemoryReport, error) {
	var info plugins.Info
	var mem plugins.MemoryReport
	p, err := startProcess(ctx, w.bin.Path, h.env(w), w.log, h.opts.Config.StartTimeout.D(), h.cgroupFor(w))
	if err != nil {
		return nil, info, mem, err
	}
	fail := func(err error) (*process, plugins.Info, plugins.MemoryReport, error) {
		p.kill()
		h.removePIDs(w, p)
		return nil, info, mem, err
	}
	if _, err := h.opts.Leases.AddPID(ctx, w.lease.ID, p.pid); err != nil {
		return fail(fmt.Errorf("register pid %d with lease %s: %w", p.pid, w.lease.ID, err))
	}
	h.sampleStart(ctx, w)
	req := w.spec.Load
	req.Device = loadDevice(w.lease)
	if mem, err = p.backend.Load(ctx, req); err != nil {
		return fail(fmt.Errorf("load %s on %s: %w", req.ModelPath, req.Device, err))
	}
	if info, err = p.backend.Info(ctx); err != nil {
		return fail(fmt.Errorf("info: %w", err))
	}
	if err := h.addAppPIDs(ctx, w, p, p.withCgroupPIDs(info.PIDs)); err != nil {
		return fail(err)
	}
	h.sample(ctx, w, "load") // with the app's processes on the lease
	if info.Name != w.bin.Name {
		w.log.Warn("backend calls itself by another name than its file", "info_name", info.Name, "path", w.bin.Path)
	}
	return p, info, mem, nil
}

// startWorker starts a new instance under lease l and hands it out.
func (h *Host) startWorker(ctx context.Context, spec Spec, bin Binary, l placement.Lease) (*Instance, func(), error) {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		h.releaseLease(l, "plugin host stopped")
		return nil, nil, ErrStopped
	}
	h.nextID++
	w := &worker{
		id: fmt.Sprintf("i-%d", h.nextID), key: keyOf(spec), spec: spec, bin: bin, lease: l,
		keepAlive: spec.KeepAlive, state: StateStarting, log: h.log.With("backend", bin.Name, "lease", l.ID),
		renewAt: time.Now().Add(h.ttl / 3), // renewed while the model loads, however long that takes
		streams: 1, maxStreams: max(1, spec.MaxStreams), peakStreams: 1, bytes: l.Bytes,
	}
	h.workers[w.id] = w
	h.mu.Unlock()
	h.wake()

	p, info, mem, err := h.launch(ctx, w)
	now := time.Now()
	h.mu.Lock()
	ours := w.state == StateStarting // else shutdown claimed it and drops it
	if err == nil && ours {
		w.proc, w.info, w.memory, w.started, w.lastUsed = p, info, mem, now, now
		w.state, w.healthAt = StateBusy, now.Add(h.opts.Config.HealthInterval.D())
		h.broadcast() // callers waiting to join it look again
	} else if ours {
		w.state = StateStopping
	}
	h.mu.Unlock()
	if err == nil && !ours {
		p.kill()
		err = ErrStopped
	}
	if err != nil {
		if ours {
			h.drop(w, "start failed")
		}
		return nil, nil, fmt.Errorf("host: start backend %s for %s: %w", bin.Name, spec.Load.ModelPath, err)
	}
	h.report(w, Event{Type: EventStarted, PID: p.pid, Memory: mem})
	inst := &Instance{h: h, w: w}
	return inst, inst.release, nil
}

// checkin takes a stream back from its caller, giving back what it added
// to the lease. The last stream's check-in makes the instance warm for its
// keep-alive, or drops it when it has none, has been given up, or the host
// stopped.
func (h *Host) checkin(w *worker) { h.checkinStream(w, true) }

// checkinStream is checkin; freed says whether a stream that others may
// take is free now (false for a join that failed: the stream it claimed
// was never used, and waking the waiters would wake the caller's own wait
// again, in a loop).
func (h *Host) checkinStream(w *worker, freed bool) {
	h.shrinkFor(w)
	now := time.Now()
	h.mu.Lock()
	if w.state != StateBusy || w.streams > 0 { // others still use it, or shutdown or a lost lease claimed it
		if freed {
			h.broadcast() // a stream is free
		}
		h.mu.Unlock()
		return
	}
	reason := ""
	switch {
	case w.failed != nil:
		reason = "backend given up: " + w.failed.Error()
	case h.stopped:
		reason = "plugin host stopped"
	case w.keepAlive < 0:
		reason = "released without keep-alive"
	case w.discard != "":
		reason = w.discard
	}
	if reason != "" {
		w.state = StateStopping
	} else {
		w.state, w.lastUsed, w.expires = StateIdle, now, now.Add(w.keepAlive)
		h.broadcast()
	}
	h.mu.Unlock()
	if reason != "" {
		h.drop(w, reason)
		return
	}
	h.syncReclaimable(w)
	h.wake()
}

// drop stops w's process and releases its lease. The caller has set
// w.state to StateStopping (and so owns w).
func (h *Host) drop(w *worker, reason string) {
	h.mu.Lock()
	p := w.proc
	h.mu.Unlock()
	pid := 0
	if p != nil {
		pid = p.pid
		if !p.exited() {
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			if err := p.backend.Unload(ctx); err != nil {
				w.log.Debug("unload before stopping failed", "err", err)
			}
			cancel()
		}
		p.kill()
	}
	h.releaseLease(w.lease, reason)
	h.mu.Lock()
	delete(h.workers, w.id)
	h.broadcast()
	h.mu.Unlock()
	h.report(w, Event{Type: EventStopped, PID: pid, Reason: reason})
}

// releaseLease gives a lease back; it never gives up on a live engine.
func (h *Host) releaseLease(l placement.Lease, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if _, err := h.opts.Leases.Release(ctx, l.ID, reason); err != nil {
		h.log.Warn("cannot release a backend's lease", "lease", l.ID, "err", err)
	}
}

// addAppPIDs counts the processes a backend says hold its model (an app it
// started: Info.PIDs) against w's lease, so reconciliation and learning see
// their device memory; p.extra remembers them for removePIDs.
func (h *Host) addAppPIDs(ctx context.Context, w *worker, p *process, pids []int) error {
	for _, pid := range pids {
		if pid <= 0 || pid == p.pid || slices.Contains(p.extra, pid) {
			continue
		}
		if _, err := h.opts.Leases.AddPID(ctx, w.lease.ID, pid); err != nil {
			return fmt.Errorf("register the backend's process %d with lease %s: %w", pid, w.lease.ID, err)
		}
		p.extra = append(p.extra, pid)
	}
	if len(p.extra) > 0 {
		w.log.Debug("backend's processes counted against its lease", "pids", p.extra)
	}
	return nil
}

// removePIDs stops counting a dead backend process, and the processes it
// ran, against w's lease.
func (h *Host) removePIDs(w *worker, p *process) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	for _, pid := range append([]int{p.pid}, p.extra...) {
		if _, err := h.opts.Leases.RemovePID(ctx, w.lease.ID, pid); err != nil && !errors.Is(err, placement.ErrEnded) {
			w.log.Debug("cannot unregister backend pid", "pid", pid, "err", err)
		}
	}
}

const sampleTimeout = 10 * time.Second

// sampleStart asks for the reading of a just-started backend on a GPU,
// before its Load (StartSampler).
func (h *Host) sampleStart(ctx context.Context, w *worker) {
	s, ok := h.opts.Sampler.(StartSampler)
	if !ok || w.lease.GPU == placement.CPU || w.lease.GPU == "" {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	if err := s.SampleStart(sctx, w.lease.ID); err != nil && ctx.Err() == nil {
		w.log.Warn("GPU sample at start failed", "err", err)
	}
}

// sample asks the Sampler for a GPU reading after a load or a job; a failed
// reading costs only the sample.
func (h *Host) sample(ctx context.Context, w *worker, after string) {
	if h.opts.Sampler == nil {
		return
	}
	// Bounded: a reading normally takes milliseconds; a stuck one must not
	// hold a job's result back.
	sctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	if err := h.opts.Sampler.Sample(sctx); err != nil && ctx.Err() == nil {
		w.log.Warn("GPU sample failed", "after", after, "err", err)
	}
}
