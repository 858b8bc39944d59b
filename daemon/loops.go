package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"

	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/placement"
)

// labelEstimateKey carries a model lease's estimate key (JSON) so its
// measured peak can be recorded for learning when it ends.
const labelEstimateKey = "wsched.estimate_key"

// recover restores the stored leases whose holders are still alive and
// releases the rest, before anything is served: bytes granted before a
// crash are never granted again.
func (d *Daemon) recover(ctx context.Context) error {
	stored, err := d.db.Leases()
	if err != nil {
		return fmt.Errorf("recover leases: %w", err)
	}
	var keep []placement.Lease
	for _, l := range stored {
		if !procwatch.Alive(d.procRoot, l.Holder.PID, l.Holder.StartTicks) {
			d.log.Info("lease released: its holder exited while the daemon was down", "lease", l.ID, "holder", l.Holder.PID)
			if err := d.db.DeleteLease(l.ID); err != nil {
				return fmt.Errorf("recover leases: %w", err)
			}
			continue
		}
		var live []int
		for _, pid := range l.PIDs {
			if procwatch.Alive(d.procRoot, pid, 0) {
				live = append(live, pid)
			}
		}
		l.PIDs = live
		keep = append(keep, l)
	}
	if err := d.eng.Restore(ctx, keep); err != nil {
		return fmt.Errorf("recover leases: %w", err)
	}
	for _, l := range keep {
		if err := d.watch.WatchProcess(d.procRoot, l.Holder.PID, l.Holder.StartTicks); err != nil {
			d.log.Warn("cannot watch holder", "pid", l.Holder.PID, "err", err)
		}
		for _, pid := range l.PIDs {
			if err := d.watch.Watch(pid); err != nil {
				d.log.Warn("cannot watch lease process", "pid", pid, "err", err)
			}
		}
	}
	d.log.Info("leases recovered", "restored", len(keep), "released", len(stored)-len(keep))
	return nil
}

// pumpExits releases the leases of processes that exit.
func (d *Daemon) pumpExits(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case pid := <-d.watch.Exited():
			ended, err := d.eng.HolderExited(ctx, pid)
			if err != nil {
				return
			}
			for _, l := range ended {
				d.log.Info("lease released: holder exited", "lease", l.ID, "holder", pid)
			}
		}
	}
}

// pumpEvents follows the engine's events: holders of new leases are
// watched, and ended model leases teach the estimator their measured peak.
func (d *Daemon) pumpEvents(ctx context.Context) {
	for ctx.Err() == nil {
		ch, cancel, err := d.eng.Subscribe(ctx)
		if err != nil {
			return
		}
		for ev := range ch {
			d.onEvent(ev)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		d.log.Warn("event pump fell behind; resubscribing")
		d.resyncWatches(ctx)
	}
}

func (d *Daemon) onEvent(ev placement.Event) {
	switch ev.Type {
	case placement.EventGranted:
		if err := d.watch.WatchProcess(d.procRoot, ev.Lease.Holder.PID, ev.Lease.Holder.StartTicks); err != nil {
			d.log.Warn("cannot watch holder", "pid", ev.Lease.Holder.PID, "err", err)
		}
	case placement.EventReleased, placement.EventExpired:
		d.learn(ev.Lease)
	}
}

// resyncWatches makes sure every current holder is watched.
func (d *Daemon) resyncWatches(ctx context.Context) {
	v, err := d.eng.View(ctx)
	if err != nil {
		return
	}
	for _, g := range v.GPUs {
		for _, l := range g.Leases {
			_ = d.watch.Watch(l.Holder.PID)
		}
	}
	for _, l := range v.CPU {
		_ = d.watch.Watch(l.Holder.PID)
	}
}

// learn records an ended model lease's measured peak under its estimate key.
func (d *Daemon) learn(l placement.Lease) {
	raw, ok := l.Labels[labelEstimateKey]
	if !ok || l.PeakBytes <= 0 {
		return
	}
	var key estimator.Key
	if err := json.Unmarshal([]byte(raw), &key); err != nil {
		d.log.Warn("lease has an unreadable estimate key", "lease", l.ID, "err", err)
		return
	}
	key.GPUModel = l.GPUName
	if err := d.db.RecordPeak(key, l.PeakBytes); err != nil {
		d.log.Warn("cannot record measured peak", "lease", l.ID, "err", err)
		return
	}
	d.log.Info("learned a measured peak", "lease", l.ID, "key", key.String(), "peak_bytes", l.PeakBytes)
}

// refreshLoop re-reads the GPUs every [inventory] refresh_interval and hands
// the reading to the engine (reconciliation; waiters granted when foreign
// memory is freed), attributing processes to leases through their parents.
func (d *Daemon) refreshLoop(ctx context.Context) {
	every := d.cfg.Inventory.RefreshInterval.D()
	t := time.NewTimer(every)
	defer t.Stop()
	lastStatus := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		snap, err := d.reader.Refresh(ctx)
		if err != nil {
			d.log.Warn("GPU reading failed", "err", err)
		} else {
			d.attributeChildren(ctx, snap)
			if err := d.eng.Observe(ctx, snap); err != nil {
				return
			}
		}
		if st := d.statusLine(ctx); st != lastStatus {
			d.notify("STATUS=" + st)
			lastStatus = st
		}
		t.Reset(every)
	}
}

func (d *Daemon) statusLine(ctx context.Context) string {
	v, err := d.eng.View(ctx)
	if err != nil {
		return ""
	}
	leases := len(v.CPU)
	for _, g := range v.GPUs {
		leases += len(g.Leases)
	}
	return fmt.Sprintf("%d GPUs (%s), %d leases, %d queued", len(v.GPUs), v.Provider, leases, len(v.Queue))
}

// watchdog pings systemd's watchdog through the engine's owner loop, so a
// stuck loop stops the pings and systemd restarts the daemon.
func (d *Daemon) watchdog(ctx context.Context) {
	interval, err := sddaemon.SdWatchdogEnabled(false)
	if err != nil || interval == 0 {
		return
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, interval/2)
		if err := d.eng.Ping(pctx); err == nil {
			d.notify("WATCHDOG=1")
		} else {
			d.log.Error("placement loop does not answer; withholding the watchdog ping", "err", err)
		}
		cancel()
		t.Reset(interval / 2)
	}
}

func (d *Daemon) notifyReady() {
	d.notify("READY=1\nSTATUS=" + d.statusLine(context.Background()))
}

// notify sends a state line to systemd when NOTIFY_SOCKET is set.
func (d *Daemon) notify(state string) {
	if _, err := sddaemon.SdNotify(false, state); err != nil {
		d.log.Warn("sd_notify failed", "state", state, "err", err)
	}
}
