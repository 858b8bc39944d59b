package host

import (
	"context"
	"errors"
	"time"

	"github.com/wsched/wsched/placement"
)

// Idle instances and the engine. An instance kept warm for its next job
// holds memory the host can give back at once, so its lease is marked
// reclaimable while it is idle. The placement engine decides when that
// memory is needed (for the host's own loads and for any other lease
// request alike) and asks for it with an EventReclaim; the host then stops
// the instance, unless a load of the same model is waiting to take it.

// syncReclaimable tells the engine whether w's lease is reclaimable: yes
// while w is idle. Calls for one worker are serialized and each reads the
// worker's state afresh, so the last one leaves the engine right.
func (h *Host) syncReclaimable(w *worker) {
	w.markMu.Lock()
	defer w.markMu.Unlock()
	h.mu.Lock()
	want := w.state == StateIdle || w.state == StateChecking
	h.mu.Unlock()
	if want == w.marked {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if _, err := h.opts.Leases.SetReclaimable(ctx, w.lease.ID, want); err != nil {
		w.log.Debug("cannot mark the lease reclaimable", "reclaimable", want, "err", err)
		return
	}
	w.marked = want
}

// watchReclaims acts on the engine's reclaim requests until ctx ends. A
// subscription the engine dropped (the host fell behind) is taken again.
func (h *Host) watchReclaims(ctx context.Context) {
	for ctx.Err() == nil {
		events, cancel, err := h.opts.Leases.Subscribe(ctx, placement.EventReclaim)
		if errors.Is(err, placement.ErrStopped) {
			return
		}
		if err != nil && ctx.Err() != nil {
			return
		}
		if err != nil {
			h.log.Warn("cannot follow the placement engine's events", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		placement.Follow(ctx, events, func(ev placement.Event) {
			if ev.Type == placement.EventReclaim {
				h.onReclaim(ev)
			}
		})
		cancel()
	}
}

// onReclaim stops the idle instance whose lease the engine asks back. An
// instance in use, or wanted by a waiting load of its own model, is kept:
// taking it unmarks the lease and the engine plans again. One being
// health-checked is stopped when the check ends.
func (h *Host) onReclaim(ev placement.Event) {
	reason := "evicted (idle): its memory was reclaimed (" + ev.Reason + ")"
	h.mu.Lock()
	var w *worker
	for _, x := range h.workers {
		if x.lease.ID == ev.Lease.ID {
			w = x
		}
	}
	switch {
	case w == nil || h.wantedByWaiter(w):
		w = nil
	case w.state == StateChecking:
		w.discard, w = reason, nil
	case w.state == StateIdle:
		w.state = StateStopping
	default:
		w = nil
	}
	h.mu.Unlock()
	if w != nil {
		h.background(func() { h.drop(w, reason) })
	}
}
