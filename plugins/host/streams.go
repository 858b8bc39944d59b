package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
)

// Streams that share one instance (issue 26). An instance whose spec allows
// MaxStreams > 1 serves up to that many callers of its key at once: one
// process, one copy of the weights, a decoding state per call. Its lease is
// the first stream's (Spec.MemoryBytes: the shared part and one stream)
// and grows by one stream's estimate (Spec.StreamBytes) through the
// engine's Resize when a caller joins, and shrinks by as much when that
// caller releases. A caller joins only when the growth fits on the
// instance's GPU now; otherwise it starts an instance of its own when a
// whole one fits elsewhere, or waits in the placement queue (and joins as
// soon as a stream's growth fits: waitForRoom tries again on every change
// and every joinRetry).
//
// Ownership stays as in doc.go: the callers share the instance, and only
// the one whose call saw the process die restarts it (the others' calls on
// the dead process wait for that restart and then fail with
// plugins.ErrUnavailable, so each is retried cleanly); the last caller to
// release it makes it idle or drops it.

// streamBytes is what one more stream adds to the instance's lease: the
// spec's StreamBytes, or its whole size when it gives none.
func (s Spec) streamBytes() int64 {
	if s.StreamBytes > 0 {
		return s.StreamBytes
	}
	return s.MemoryBytes
}

// shared reports whether spec's instances take several streams.
func (s Spec) shared() bool { return s.MaxStreams > 1 }

// joinable claims a stream on a busy instance of k that has room for one
// more and a first stream at least as large as spec's; nil when there is
// none. Call with h.mu held.
func (h *Host) joinable(k key, spec Spec) *worker {
	if !spec.shared() {
		return nil
	}
	var best *worker
	for _, w := range h.workers {
		if w.state == StateBusy && w.key == k && w.failed == nil && w.discard == "" &&
			w.streams < w.maxStreams && w.lease.Bytes >= spec.MemoryBytes &&
			(best == nil || w.streams > best.streams) { // fill one instance before the next
			best = w
		}
	}
	if best != nil {
		best.streams++
		best.peakStreams = max(best.peakStreams, best.streams)
		best.keepAlive = spec.KeepAlive
	}
	return best
}

// join adds a stream to a busy instance of k, growing its lease by one
// stream; nil when no instance can take one now (none with room, or the
// growth does not fit on its GPU).
func (h *Host) join(ctx context.Context, k key, spec Spec) *Instance {
	grow := spec.streamBytes()
	h.mu.Lock()
	w := h.joinable(k, spec)
	if w != nil && w.lease.GPU != placement.CPU && w.lease.GPU != "" {
		w.grown = append(w.grown, grow)
	} else {
		grow = 0
	}
	h.mu.Unlock()
	if w == nil {
		return nil
	}
	if err := h.syncSize(ctx, w); err != nil {
		w.log.Debug("no room for one more stream on the instance's GPU", "grow", units.FormatBytes(grow), "err", err)
		h.checkinStream(w, false) // a stream never used: no news for the waiters (it would wake this caller's own wait)
		return nil
	}
	h.mu.Lock()
	l := w.lease
	l.Bytes = w.bytes
	h.mu.Unlock()
	spec.granted(l)
	return &Instance{h: h, w: w, added: grow}
}

// syncSize resizes w's lease to what its streams need now: the first
// stream's size and one growth per other stream (w.grown). Calls for one
// worker are serialized; each reads the streams afresh, so the last one
// leaves the lease right, and a stream that left while another joined
// never takes the lease below what the streams still there need.
func (h *Host) syncSize(ctx context.Context, w *worker) error {
	w.sizeMu.Lock()
	defer w.sizeMu.Unlock()
	h.mu.Lock()
	want := w.lease.Bytes
	for _, g := range w.grown {
		want += g
	}
	have, gone, unsure := w.bytes, w.state == StateStopping || w.failed != nil, w.sizeUnsure
	h.mu.Unlock()
	if (want == have && !unsure) || gone {
		return nil
	}
	l, err := h.opts.Leases.Resize(ctx, w.lease.ID, want)
	if err != nil {
		if !refused(err) { // it may have taken effect (say ctx ended while it was committed): ask again next time
			h.mu.Lock()
			w.sizeUnsure = true
			h.mu.Unlock()
		}
		return fmt.Errorf("resize lease %s to %s: %w", w.lease.ID, units.FormatBytes(want), err)
	}
	h.mu.Lock()
	w.bytes, w.sizeUnsure = l.Bytes, false
	h.mu.Unlock()
	w.log.Debug("lease resized for streams", "bytes", l.Bytes, "was", have)
	return nil
}

// refused reports whether a resize error is the engine saying no before
// changing anything (no room, a limit), rather than an answer lost on the
// way (ctx ended while the change was committed, the engine stopping).
func refused(err error) bool {
	return errors.Is(err, placement.ErrNoFit) || errors.Is(err, placement.ErrLimit)
}

// shrinkFor counts a stream of w out and gives back one stream's growth of
// its lease (whichever stream leaves: the lease is the first stream's and
// one growth per other stream), unless the worker is being stopped or gave
// its lease up (its release ends it).
func (h *Host) shrinkFor(w *worker) {
	h.mu.Lock()
	w.streams--
	popped := false
	for len(w.grown) > max(w.streams-1, 0) {
		w.grown, popped = w.grown[:len(w.grown)-1], true
	}
	h.mu.Unlock()
	if !popped {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := h.syncSize(ctx, w); err != nil {
		w.log.Warn("cannot shrink the lease after a stream ended", "err", err)
	}
}

// forming counts the callers of a shared key starting an instance (or
// waiting for memory to start one) and the callers waiting to join those
// instances once they run, so that concurrent first callers start one
// instance, not one each.
type forming struct {
	starters, joiners int
}

// awaitForming waits, when an instance of k is being started with room for
// another stream, until that start ends (then the caller tries to join it).
// It reports whether it waited; false means the caller should start an
// instance itself (it is then counted as a starter until done is called).
func (h *Host) awaitForming(ctx context.Context, k key, spec Spec) (waited bool, done func(), err error) {
	if !spec.shared() {
		return false, func() {}, nil
	}
	h.mu.Lock()
	f := h.forming[k]
	if f.joiners < f.starters*(spec.MaxStreams-1) {
		f.joiners++
		h.forming[k] = f
		h.awaitChange(ctx)
		f = h.forming[k]
		f.joiners--
		h.setForming(k, f)
		h.mu.Unlock()
		if ctx.Err() != nil {
			return true, nil, fmt.Errorf("host: acquire: %w", ctx.Err())
		}
		return true, nil, nil
	}
	f.starters++
	h.forming[k] = f
	h.mu.Unlock()
	return false, func() {
		h.mu.Lock()
		f := h.forming[k]
		f.starters--
		h.setForming(k, f)
		h.broadcast() // its joiners look again
		h.mu.Unlock()
	}, nil
}

// setForming stores f for k, dropping it when empty. Call with h.mu held.
func (h *Host) setForming(k key, f forming) {
	if f == (forming{}) {
		delete(h.forming, k)
		return
	}
	h.forming[k] = f
}
