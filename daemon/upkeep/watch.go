package upkeep

import (
	"context"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/placement"
)

// pumpExits releases the leases of processes that exit.
func (u *Upkeep) pumpExits(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case pid := <-u.opts.Watcher.Exited():
			ended, err := u.opts.Engine.HolderExited(ctx, pid)
			if err != nil {
				return
			}
			for _, l := range ended {
				u.log.Info("lease released: holder exited", "lease", l.ID, "holder", pid)
			}
		}
	}
}

// pumpEvents follows the engine's events: holders of new leases are
// watched, and ended model leases teach the estimator their measured peak.
// The first subscription is the one Recover took.
func (u *Upkeep) pumpEvents(ctx context.Context) {
	ch, cancel := u.events, u.unsubscribe
	for ctx.Err() == nil {
		if ch == nil {
			var err error
			if ch, cancel, err = u.opts.Engine.Subscribe(ctx); err != nil {
				return
			}
			u.resyncWatches()
		}
		placement.Follow(ctx, ch, u.onEvent)
		cancel()
		ch = nil
		if ctx.Err() == nil {
			u.log.Warn("event pump fell behind; resubscribing")
		}
	}
}

func (u *Upkeep) onEvent(ev placement.Event) {
	switch ev.Type {
	case placement.EventGranted:
		if err := u.opts.Watcher.WatchProcess(u.opts.ProcRoot, ev.Lease.Holder.PID, ev.Lease.Holder.StartTicks); err != nil {
			u.log.Warn("cannot watch holder", "pid", ev.Lease.Holder.PID, "err", err)
		}
	case placement.EventReleased, placement.EventExpired:
		u.learn(ev.Lease)
	}
}

// resyncWatches makes sure every current holder is watched.
func (u *Upkeep) resyncWatches() {
	v := u.opts.Engine.View()
	for _, g := range v.GPUs {
		for _, l := range g.Leases {
			_ = u.opts.Watcher.Watch(l.Holder.PID)
		}
	}
	for _, l := range v.CPU {
		_ = u.opts.Watcher.Watch(l.Holder.PID)
	}
}

// learn records an ended model lease's measured peak under its estimate
// key, for the GPU model it ran on and the driver's major version.
func (u *Upkeep) learn(l placement.Lease) {
	if l.EstimateKey == nil || l.PeakBytes <= 0 {
		return
	}
	key := *l.EstimateKey
	key.GPUModel, key.Driver = l.GPUName, estimator.DriverMajor(u.opts.Engine.View().Driver)
	if err := u.opts.Store.RecordPeak(key, l.PeakBytes); err != nil {
		u.log.Warn("cannot record measured peak", "lease", l.ID, "err", err)
		return
	}
	u.log.Info("learned a measured peak", "lease", l.ID, "key", key.String(), "peak_bytes", l.PeakBytes)
}
