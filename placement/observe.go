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
	var seq uint64
	if err := e.do(ctx, func(s *state) { seq = s.observe(snap, attrs) }); err != nil {
		return err
	}
	if seq == 0 {
		return nil
	}
	if err := e.st.journal.sync(ctx, seq); err != nil {
		return fmt.Errorf("observe: persist attributed processes: %w", err)
	}
	return nil
}

// Owner is the lease a process belongs to.
type Owner struct {
	Lease string
	// StartTicks is the holder's start time when the process is the
	// lease's holder (0 for a registered process): a process with the
	// holder's PID but another start time is not the holder.
	StartTicks uint64
}

// Owners returns, for those of pids that a granted GPU lease lists as its
// holder or a registered process, the lease (one of them when several do),
// and how many GPU leases there are. It costs O(len(pids)), however many
// leases there are.
func (e *Engine) Owners(ctx context.Context, pids []int) (map[int]Owner, int, error) {
	out := map[int]Owner{}
	var n int
	err := e.do(ctx, func(s *state) {
		n = s.gpuLeases
		for _, pid := range pids {
			for l := range s.owners[pid] {
				if cur, ok := out[pid]; l.GPU != CPU && (!ok || l.ID < cur.Lease) {
					o := Owner{Lease: l.ID}
					if l.Holder.PID == pid {
						o.StartTicks = l.Holder.StartTicks
					}
					out[pid] = o
				}
			}
		}
	})
	return out, n, err
}

// observe applies a reading and attributions; it returns the sequence
// number of the last change to commit (0: none).
func (s *state) observe(snap inventory.Snapshot, attrs []Attribution) uint64 {
	changes := s.attribute(attrs)
	s.adopt(snap)
	s.dispatch()
	if s.journal == nil {
		return 0
	}
	var seq uint64
	for _, c := range changes {
		seq = s.record(c, nil)
	}
	return seq
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
		s.change(l, func() { l.PIDs = append(l.PIDs, a.PID) })
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
// accounting formula counts it. Only the leases whose processes appear in
// the reading are looked at, and those measured the time before (their use
// drops to 0): the cost follows the processes, not the leases.
func (s *state) reconcile() {
	tol := 1 + float64(s.opts.Leases.OverrunTolerance)
	now := map[*Lease]int64{}
	for _, b := range s.books {
		totals := map[int]int64{} // pid → Σ bytes of the leases here listing it
		for l := range b.measured {
			now[l] = b.share(l, totals)
		}
	}
	for l := range s.measured {
		if _, ok := now[l]; !ok {
			delete(s.measured, l)
			s.checkOverrun(l, 0, tol)
		}
	}
	for l, used := range now {
		s.measured[l] = struct{}{}
		s.checkOverrun(l, used, tol)
	}
}

// share is l's part of the memory its processes use on this GPU.
func (b *book) share(l *Lease, totals map[int]int64) int64 {
	var share float64
	for _, pid := range uniquePIDs(l) {
		used, ok := b.used[pid]
		if !ok {
			continue
		}
		total, ok := totals[pid]
		if !ok {
			for x := range b.byPID[pid] {
				total += x.Bytes
			}
			totals[pid] = total
		}
		if total > 0 {
			share += float64(used) * float64(l.Bytes) / float64(total)
		}
	}
	return int64(share)
}

func uniquePIDs(l *Lease) []int {
	pids := l.pids()
	slices.Sort(pids)
	return slices.Compact(pids)
}

func (s *state) checkOverrun(l *Lease, used int64, tol float64) {
	before := [3]int64{l.UsedBytes, l.PeakBytes, b2i(l.Overrun)}
	defer func() {
		if [3]int64{l.UsedBytes, l.PeakBytes, b2i(l.Overrun)} != before {
			s.republish(l)
		}
	}()
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

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
