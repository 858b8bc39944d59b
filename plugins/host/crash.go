package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/wsched/wsched/placement"
)

// crashed handles a backend process p of w that died, or answered
// plugins.ErrUnavailable, while w's owner (a caller or a health check) was
// using it: it reports the crash, then restarts the backend under the same
// lease and reloads its model, or gives w up. w's state is the owner's
// again when it returns; w.failed says whether it is usable.
func (h *Host) crashed(ctx context.Context, w *worker, p *process, during string, cause error) {
	h.mu.Lock()
	if w.proc == p && w.state == StateRestarting { // another stream's call is restarting it
		h.awaitRestart(ctx, w)
		h.mu.Unlock()
		return
	}
	if w.proc != p || w.failed != nil || (w.state != StateBusy && w.state != StateChecking) {
		h.mu.Unlock() // handled already, given up, or being stopped
		return
	}
	owner := w.state
	w.state = StateRestarting
	h.mu.Unlock()

	h.report(w, Event{Type: EventCrashed, PID: p.pid, During: during, Err: cause})
	p.kill()
	h.removePIDs(w, p)
	newPID, err := h.restart(ctx, w)

	h.mu.Lock()
	if w.state == StateRestarting {
		w.state = owner
	}
	if err != nil && w.failed == nil {
		w.failed = err
	}
	h.broadcast() // other streams waiting for the restart, and joiners
	h.mu.Unlock()
	if err != nil {
		h.report(w, Event{Type: EventGivenUp, PID: p.pid, Err: err})
		return
	}
	h.report(w, Event{Type: EventRestarted, PID: newPID})
}

// awaitRestart waits, with h.mu held (released while waiting), until
// another caller's restart of w ends or ctx ends: a stream whose call died
// with the process returns its error only once the instance serves again.
func (h *Host) awaitRestart(ctx context.Context, w *worker) {
	for w.state == StateRestarting && ctx.Err() == nil {
		h.awaitChange(ctx)
	}
}

// restart starts a new process for w under its lease, trying until
// [backends] max_restarts restarts have been spent. It returns the new PID.
func (h *Host) restart(ctx context.Context, w *worker) (int, error) {
	limit := h.opts.Config.MaxRestarts
	for {
		h.mu.Lock()
		n := w.restarts
		if n < limit {
			w.restarts++
		}
		h.mu.Unlock()
		if n >= limit {
			return 0, fmt.Errorf("%w: %d restarts spent ([backends] max_restarts = %d)", ErrGivenUp, n, limit)
		}
		if _, err := h.opts.Leases.Renew(ctx, w.lease.ID, h.ttl); err != nil {
			return 0, fmt.Errorf("%w: lease %s: %w", ErrGivenUp, w.lease.ID, err)
		}
		p, info, mem, err := h.launch(ctx, w)
		if err != nil {
			if ctx.Err() != nil {
				return 0, fmt.Errorf("%w: restart: %w", ErrGivenUp, err)
			}
			w.log.Error("backend restart failed", "attempt", n+1, "err", err)
			continue
		}
		h.mu.Lock()
		ours := w.state == StateRestarting
		if ours {
			w.proc, w.info, w.memory = p, info, mem
		}
		h.mu.Unlock()
		if !ours {
			p.kill()
			return 0, ErrStopped
		}
		return p.pid, nil
	}
}

// healthCheck asks an idle backend (claimed as StateChecking by Run)
// whether it can serve, restarts it if not, and makes it idle again.
func (h *Host) healthCheck(ctx context.Context, w *worker) {
	h.mu.Lock()
	p := w.proc
	h.mu.Unlock()
	err := errExited
	if !p.exited() {
		hctx, cancel := context.WithTimeout(ctx, h.opts.Config.HealthInterval.D())
		err = p.backend.Health(hctx)
		cancel()
	}
	if err != nil && ctx.Err() == nil {
		h.crashed(ctx, w, p, "health check", err)
	}
	h.mu.Lock()
	if w.state != StateChecking { // shutdown claimed it
		h.mu.Unlock()
		return
	}
	reason := w.discard // asked back while it was checked
	if w.failed != nil {
		reason = "backend given up: " + w.failed.Error()
	}
	if reason != "" {
		w.state = StateStopping
	} else {
		w.state = StateIdle
		h.broadcast()
	}
	h.mu.Unlock()
	if reason != "" {
		h.drop(w, reason)
	}
}

// loseLease gives w up because its lease ended under it: an idle w is
// dropped; a w in use has its process stopped, so its owner's calls fail
// and its release drops it.
func (h *Host) loseLease(w *worker, err error) {
	h.mu.Lock()
	if w.failed != nil || w.state == StateStopping {
		h.mu.Unlock()
		return
	}
	w.failed = err
	idle := w.state == StateIdle
	var p *process
	if idle {
		w.state = StateStopping
	} else {
		p = w.proc
	}
	h.mu.Unlock()
	h.report(w, Event{Type: EventGivenUp, Err: err})
	switch {
	case idle:
		h.background(func() { h.drop(w, "lease ended: "+err.Error()) })
	case p != nil:
		h.background(p.kill)
	}
}

// leaseGone reports whether a lease error means the lease no longer exists.
func leaseGone(err error) bool {
	return errors.Is(err, placement.ErrEnded) || errors.Is(err, placement.ErrNotFound)
}
