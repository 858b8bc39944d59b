package upkeep

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/placement"
)

// Recover restores the stored leases whose holders are still alive and
// releases the rest, watches the survivors' processes, and hands the engine
// its first reading: call it before anything is served, so bytes granted
// before a crash are never granted again and the first view shows the GPUs.
func (u *Upkeep) Recover(ctx context.Context) error {
	events, cancel, err := u.opts.Engine.Subscribe(ctx, pumpedEvents...)
	if err != nil {
		return fmt.Errorf("recover: follow the engine: %w", err)
	}
	u.events, u.unsubscribe = events, cancel
	stored, err := u.opts.Store.Leases()
	if err != nil {
		return fmt.Errorf("recover leases: %w", err)
	}
	boot, rebooted, err := u.bootID()
	if err != nil {
		return fmt.Errorf("recover leases: %w", err)
	}
	keep := make([]placement.Lease, 0, len(stored))
	var gone []placement.Change
	now := time.Now()
	alive := map[placement.Holder]bool{} // /proc is asked once per holder, not per lease
	for _, l := range stored {
		if rebooted {
			u.log.Info("lease released: the machine rebooted since it was granted (boot ID changed)", "lease", l.ID, "holder", l.Holder.PID)
			gone = append(gone, placement.Change{Delete: l.ID})
			continue
		}
		ok, seen := alive[l.Holder]
		if !seen {
			ok = u.holderAlive(l.Holder)
			alive[l.Holder] = ok
		}
		if !ok {
			u.log.Info("lease released: its holder exited while the daemon was down", "lease", l.ID, "holder", l.Holder.PID)
			gone = append(gone, placement.Change{Delete: l.ID})
			continue
		}
		u.alive(&l)
		u.resumeTTL(&l, now)
		keep = append(keep, l)
	}
	gone = append(gone, u.markOvercommitted(keep)...)
	if len(gone) > 0 {
		if err := u.opts.Store.Apply(gone); err != nil { // one commit for all
			return fmt.Errorf("recover leases: %w", err)
		}
	}
	if boot != "" { // after the release: a crash before it finds the old ID again
		if err := u.opts.Store.SetBootID(boot); err != nil {
			return fmt.Errorf("recover leases: store the boot ID: %w", err)
		}
	}
	u.watchLeases(keep) // an exit from now on is reported once Run follows exits
	restored := len(keep)
	if err := u.opts.Engine.Restore(ctx, keep); err != nil { // keep is the engine's now
		return fmt.Errorf("recover leases: %w", err)
	}
	u.log.Info("leases recovered", "restored", restored, "released", len(stored)-restored)
	if err := u.observe(ctx); err != nil {
		return fmt.Errorf("recover: first GPU reading: %w", err)
	}
	return nil
}

// bootID returns the running kernel's boot ID, and whether it differs from
// the one stored with the leases: after a reboot no stored holder can be
// alive, whatever process now has its PID and start time. A boot ID that
// cannot be read (no /proc/sys) trusts PIDs and start times alone.
func (u *Upkeep) bootID() (id string, rebooted bool, err error) {
	was, err := u.opts.Store.BootID()
	if err != nil {
		return "", false, fmt.Errorf("read the stored boot ID: %w", err)
	}
	id = procwatch.BootID(u.opts.ProcRoot)
	if id == "" {
		u.log.Warn("cannot read the boot ID; a reboot is told from PID start times alone", "path", u.opts.ProcRoot+"/sys/kernel/random/boot_id")
		return "", false, nil
	}
	if was != "" && was != id {
		u.log.Warn("the machine rebooted since the leases were stored: releasing them all", "stored_boot_id", was, "boot_id", id)
		return id, true, nil
	}
	return id, false, nil
}

// OvercommitReason marks a restored lease that does not fit its GPU with
// the leases granted before it (a state restored by `wsched state repair`
// can hold bytes that were granted again meanwhile).
const OvercommitReason = "overcommitted after restore"

// markOvercommitted marks, per GPU, the most recently granted leases that
// take the sum past the GPU's memory (as the lease recorded it): they stay,
// since their holders live, but they are marked and logged, and the engine
// grants nothing on that GPU until enough of them end. It returns the
// marks to store.
func (u *Upkeep) markOvercommitted(keep []placement.Lease) []placement.Change {
	idx := make([]int, 0, len(keep))
	for i, l := range keep {
		if l.State == placement.StateGranted && l.GPUTotalBytes > 0 {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return keep[a].Granted.Compare(keep[b].Granted) })
	sum := map[string]int64{}
	var marks []placement.Change
	for _, i := range idx {
		l := &keep[i]
		sum[l.GPU] += l.Bytes
		if sum[l.GPU] <= l.GPUTotalBytes || l.Reason == OvercommitReason {
			continue
		}
		l.Reason = OvercommitReason
		u.log.Warn("restored lease over the GPU's capacity: kept for its live holder, marked", "lease", l.ID,
			"gpu", l.GPU, "bytes", l.Bytes, "leased_on_gpu", sum[l.GPU], "gpu_total", l.GPUTotalBytes, "holder", l.Holder.PID)
		marked := *l
		marks = append(marks, placement.Change{Put: &marked})
	}
	return marks
}

// holderAlive reports whether the holder still runs (and is the process
// that started then). The watcher reads /proc once per process, however
// many leases it holds.
func (u *Upkeep) holderAlive(h placement.Holder) bool {
	info, err := u.opts.Watcher.Lookup(u.opts.ProcRoot, h.PID)
	return err == nil && (h.StartTicks == 0 || info.StartTicks == h.StartTicks)
}

// resumeTTL gives a live holder's lease the time the outage took from it:
// a lease whose TTL ran out (or would within a third of it, before its
// holder could renew) while the daemon was down or stopped gets its whole
// TTL again from now, so a restart never ends the lease of a process that
// still runs and renews.
func (u *Upkeep) resumeTTL(l *placement.Lease, now time.Time) {
	if l.Expires.IsZero() || l.TTL <= 0 || l.Expires.Sub(now) >= l.TTL/3 {
		return
	}
	u.log.Info("lease restored past its TTL: the holder lives, the TTL starts again", "lease", l.ID,
		"holder", l.Holder.PID, "expired", l.Expires, "ttl", l.TTL)
	l.Expires = now.Add(l.TTL)
}

// alive keeps the lease's added PIDs that still run and are the processes
// that were added (the same start time, where it was stored): a PID the
// kernel has given to another process since is dropped, not counted.
func (u *Upkeep) alive(l *placement.Lease) {
	var live []int
	for _, pid := range l.PIDs {
		if procwatch.Alive(u.opts.ProcRoot, pid, l.PIDStarts[pid]) {
			live = append(live, pid)
			continue
		}
		delete(l.PIDStarts, pid)
	}
	l.PIDs = live
}

// watchLeases watches the leases' holders and registered processes, each
// process once however many leases name it.
func (u *Upkeep) watchLeases(leases []placement.Lease) {
	holders := map[placement.Holder]struct{}{}
	pids := map[int]struct{}{}
	for _, l := range leases {
		if _, done := holders[l.Holder]; !done {
			holders[l.Holder] = struct{}{}
			if err := u.opts.Watcher.WatchProcess(u.opts.ProcRoot, l.Holder.PID, l.Holder.StartTicks); err != nil {
				u.log.Warn("cannot watch holder", "pid", l.Holder.PID, "err", err)
			}
		}
		for _, pid := range l.PIDs {
			if _, done := pids[pid]; done {
				continue
			}
			pids[pid] = struct{}{}
			if start := l.PIDStarts[pid]; start != 0 {
				if err := u.opts.Watcher.WatchProcess(u.opts.ProcRoot, pid, start); err != nil {
					u.log.Warn("cannot watch lease process", "pid", pid, "err", err)
				}
				continue
			}
			if err := u.opts.Watcher.Watch(pid); err != nil {
				u.log.Warn("cannot watch lease process", "pid", pid, "err", err)
			}
		}
	}
}
