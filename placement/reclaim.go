package placement

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/wsched/wsched/internal/units"
)

// Reclaimable memory. A holder that keeps memory it can give back on demand
// (the plugin host's idle backends, kept warm for their next job) marks its
// lease reclaimable. The engine alone decides when that memory is needed:
// after each dispatch, for every waiter that still does not fit, it asks the
// holders of just enough reclaimable leases on one GPU, least recently
// marked first, to release them (EventReclaim, once per lease), and the
// waiter is granted when they do. Outside lease requests and the daemon's
// own loads reclaim alike; the holder only has to act on the event.

// SetReclaimable marks the lease id reclaimable (on) or not. A lease asked
// back but unmarked before its release is no longer counted on, and the
// queue is planned again.
func (e *Engine) SetReclaimable(ctx context.Context, id string, on bool) (Lease, error) {
	return e.call(ctx, func(s *state) (Lease, error) { return s.setReclaimable(id, on) })
}

func (s *state) setReclaimable(id string, on bool) (Lease, error) {
	l, err := s.active(id)
	if err != nil {
		return Lease{}, err
	}
	if l.Reclaimable != on {
		l.Reclaimable, l.ReclaimableSince = on, time.Time{}
		if on {
			l.ReclaimableSince = s.now()
			s.reclaimable[id] = l
		} else {
			delete(s.reclaiming, id)
			delete(s.reclaimable, id)
		}
		s.republish(l)
		s.dispatch()
	}
	return l.clone(), nil
}

// reclaim asks back reclaimable leases for the waiters that still do not
// fit, and records in s.covered the waiters whose memory is on its way.
// Memory held for starving waiters ahead of a waiter (heldOn: the GPU
// holding memory for each) is not counted as free for it; its own is.
func (s *state) reclaim(heldOn map[string]string) {
	clear(s.covered)
	if s.queue.len() == 0 || len(s.reclaimable) == 0 {
		return // nothing to ask back
	}
	coming := s.pendingReclaims()
	claimed, ahead := map[string]int64{}, map[string]int64{}
	accounts := s.accounts()
	for _, w := range s.ordered(s.now()) {
		if w.lease.State != StateQueued {
			continue
		}
		if gpu, ok := s.reclaimTarget(w, accounts, ahead, coming, claimed); ok {
			claimed[gpu] += w.lease.Bytes
			s.covered[w] = true
		}
		if gpu, ok := heldOn[w.lease.ID]; ok {
			ahead[gpu] += w.lease.Bytes
		}
	}
}

// pendingReclaims sums, per GPU, the leases asked back and not yet released
// (pruning those that ended or stopped being reclaimable).
func (s *state) pendingReclaims() map[string]int64 {
	coming := map[string]int64{}
	for id := range s.reclaiming {
		l, ok := s.leases[id]
		if !ok || !l.Reclaimable {
			delete(s.reclaiming, id)
			continue
		}
		coming[l.GPU] += l.Bytes
	}
	return coming
}

// reclaimTarget finds the GPU where w fits with the memory already coming
// back there, or else with the fewest further bytes asked back, and asks
// for them. It returns the GPU, or false when no reclaim can make w fit.
func (s *state) reclaimTarget(w *waiter, accounts []Account, hold, coming, claimed map[string]int64) (string, bool) {
	var best []*Lease
	bestGPU, bestCost := "", int64(-1)
	for i := range accounts {
		a := &accounts[i]
		if !allowed(w.lease.Device, a) || !a.Placeable {
			continue
		}
		room := a.AvailableBytes - hold[a.UUID] + coming[a.UUID] - claimed[a.UUID]
		if room >= w.lease.Bytes {
			if coming[a.UUID] > 0 {
				return a.UUID, true // what is already coming back is enough
			}
			continue // blocked for another reason (memory held for an earlier waiter)
		}
		victims, ok := s.victims(a.UUID, w.lease.Bytes-room)
		if !ok {
			continue
		}
		cost := int64(0)
		for _, v := range victims {
			cost += v.Bytes
		}
		if bestCost < 0 || cost < bestCost {
			best, bestGPU, bestCost = victims, a.UUID, cost
		}
	}
	if bestCost < 0 {
		return "", false
	}
	for _, v := range best {
		s.reclaiming[v.ID] = true
		coming[bestGPU] += v.Bytes
		s.emit(EventReclaim, v, fmt.Sprintf("%s requested by %s does not fit without it",
			units.FormatBytes(w.lease.Bytes), w.lease.ID))
	}
	return bestGPU, true
}

// victims picks reclaimable leases on gpu not yet asked back, least
// recently marked first, until they add up to need; false when all of them
// are not enough.
func (s *state) victims(gpu string, need int64) ([]*Lease, bool) {
	var cands []*Lease
	for _, l := range s.reclaimable {
		if l.GPU == gpu && !s.reclaiming[l.ID] {
			cands = append(cands, l)
		}
	}
	slices.SortFunc(cands, func(a, b *Lease) int {
		return cmp.Or(a.ReclaimableSince.Compare(b.ReclaimableSince), cmp.Compare(a.ID, b.ID))
	})
	var got int64
	for i, l := range cands {
		got += l.Bytes
		if got >= need {
			return cands[:i+1], true
		}
	}
	return nil, false
}
