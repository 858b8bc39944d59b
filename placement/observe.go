package placement

import (
	"context"
	"fmt"
	"slices"

	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

// Attribution counts a process's GPU memory against a lease: a process the
// caller found to belong to the lease's holder (a child it started, say).
type Attribution struct {
	Lease string
	PID   int
}

// Observe hands the engine a fresh reading together with the processes to
// count against leases from now on, in one step of the owner loop: the
// attributions are applied, leases reconciled against the reading, waiting
// requests re-evaluated. The leases that gained processes are persisted in
// one commit, which Observe waits for (outside the loop). Attributions to
// leases that are no longer granted are skipped.
func (e *Engine) Observe(ctx context.Context, snap inventory.Snapshot, attrs ...Attribution) error {
	committed := make(chan error, 1)
	if err := e.do(ctx, func(s *state) { s.observe(snap, attrs, committed) }); err != nil {
		return err
	}
	select {
	case err := <-committed:
		if err != nil {
			return fmt.Errorf("observe: persist attributed processes: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *state) observe(snap inventory.Snapshot, attrs []Attribution, committed chan<- error) {
	changes := s.attribute(attrs)
	s.snap, s.haveSnap, s.stale = snap, true, false
	s.invalidate()
	s.reconcile()
	s.dispatch()
	if s.journal == nil || len(changes) == 0 {
		committed <- nil
		return
	}
	s.journal.addAll(changes, func(err error) { committed <- err })
}

// attribute adds each attributed process to its lease and returns the
// changed leases to persist.
func (s *state) attribute(attrs []Attribution) []Change {
	changed := map[string]*Lease{}
	for _, a := range attrs {
		l, ok := s.leases[a.Lease]
		if !ok || a.PID <= 0 || slices.Contains(l.pids(), a.PID) {
			continue
		}
		l.PIDs = append(l.PIDs, a.PID)
		changed[l.ID] = l
		s.log.Debug("process counted against lease", "lease", l.ID, "pid", a.PID)
	}
	changes := make([]Change, 0, len(changed))
	for _, l := range changed {
		c := l.clone()
		changes = append(changes, Change{Put: &c})
	}
	return changes
}

// reconcile compares each lease with what NVML measures for its processes
// and flags overruns beyond [leases] overrun_tolerance. A process that
// belongs to several leases on one GPU (a holder with two leases) is shared
// among them in proportion to their sizes, so it is counted once, as the
// accounting formula counts it.
func (s *state) reconcile() {
	tol := 1 + float64(s.opts.Leases.OverrunTolerance)
	for _, uses := range s.measuredUse() {
		for l, used := range uses {
			s.checkOverrun(l, used, tol)
		}
	}
}

// measuredUse returns, per GPU, each lease's share of the memory NVML
// reports for its processes.
func (s *state) measuredUse() map[string]map[*Lease]int64 {
	used := map[string]map[int]int64{}
	for _, g := range s.snap.GPUs {
		m := map[int]int64{}
		for _, p := range g.Processes {
			m[p.PID] += p.UsedBytes
		}
		used[g.UUID] = m
	}
	holders := map[string]map[int]int64{} // GPU → pid → Σ bytes of the leases it belongs to
	for _, l := range s.leases {
		if l.GPU == CPU {
			continue
		}
		if holders[l.GPU] == nil {
			holders[l.GPU] = map[int]int64{}
		}
		for _, pid := range uniquePIDs(l) {
			holders[l.GPU][pid] += l.Bytes
		}
	}
	out := map[string]map[*Lease]int64{}
	for _, l := range s.leases {
		if l.GPU == CPU {
			continue
		}
		if out[l.GPU] == nil {
			out[l.GPU] = map[*Lease]int64{}
		}
		var share float64
		for _, pid := range uniquePIDs(l) {
			if total := holders[l.GPU][pid]; total > 0 {
				share += float64(used[l.GPU][pid]) * float64(l.Bytes) / float64(total)
			}
		}
		out[l.GPU][l] = int64(share)
	}
	return out
}

func uniquePIDs(l *Lease) []int {
	pids := l.pids()
	slices.Sort(pids)
	return slices.Compact(pids)
}

func (s *state) checkOverrun(l *Lease, used int64, tol float64) {
	l.UsedBytes = used
	l.PeakBytes = max(l.PeakBytes, used)
	over := float64(used) > float64(l.Bytes)*tol
	if over && !l.Overrun {
		reason := fmt.Sprintf("uses %s of a %s lease (tolerance %.0f%%)", units.FormatBytes(used),
			units.FormatBytes(l.Bytes), 100*float64(s.opts.Leases.OverrunTolerance))
		s.log.Warn("lease overrun", "lease", l.ID, "holder", l.Holder.PID, "reason", reason)
		l.Overrun = true
		s.emit(EventOverrun, l, reason)
		if s.opts.Leases.Overrun == OverrunKill && s.opts.Signal != nil {
			s.opts.Signal(l.Holder.PID)
		}
	}
	l.Overrun = over
}
