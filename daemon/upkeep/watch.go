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
			if ch, cancel, err = u.opts.Engine.Subscribe(ctx, pumpedEvents...); err != nil {
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

// pumpedEvents are the events onEvent acts on: the pump subscribes to
// these only.
var pumpedEvents = []placement.EventType{placement.EventGranted, placement.EventReleased, placement.EventExpired}

func (u *Upkeep) onEvent(ev placement.Event) {
	switch ev.Type {
	case placement.EventGranted:
		if err := u.opts.Watcher.WatchProcess(u.opts.ProcRoot, ev.Lease.Holder.PID, ev.Lease.Holder.StartTicks); err != nil {
			u.log.Warn("cannot watch holder", "pid", ev.Lease.Holder.PID, "err", err)
		}
	case placement.EventReleased, placement.EventExpired:
		u.learn(ev.Lease)
		u.unwatchFormer(ev)
	}
}

// unwatchFormer stops watching an ended lease's processes that hold no
// other lease (the event lists them): a holder that lives on after its
// lease must not keep a descriptor in the daemon for long (one user could
// otherwise pile them up; the watcher keeps a bounded few for a while, so
// a process that leases again soon needs no new pidfd). A PID that gets a
// lease again is watched again by its grant event, which this goroutine
// handles after this one.
func (u *Upkeep) unwatchFormer(ended placement.Event) {
	for _, pid := range ended.Unheld {
		u.opts.Watcher.Unwatch(pid)
	}
}

// resyncWatches makes sure every current holder is watched, and is still
// the process that started when the lease was granted (a PID reused while
// the pump was away is reported as the holder's exit).
func (u *Upkeep) resyncWatches() {
	v := u.opts.Engine.View()
	watch := func(h placement.Holder) {
		if err := u.opts.Watcher.WatchProcess(u.opts.ProcRoot, h.PID, h.StartTicks); err != nil {
			u.log.Warn("cannot watch holder", "pid", h.PID, "err", err)
		}
	}
	for _, g := range v.GPUs {
		for _, l := range g.Leases {
			watch(l.Holder)
		}
	}
	for _, l := range v.CPU {
		watch(l.Holder)
	}
}

// learn records an ended model lease's measured peak under its estimate
// key, for the GPU model it ran on and the driver's major version.
func (u *Upkeep) learn(l placement.Lease) {
	if l.EstimateKey == nil || l.PeakBytes <= 0 {
		return
	}
	if l.MaxBytes > 0 { // resized (grown for more streams): its peak is not one stream's process (issue 26)
		u.log.Debug("no peak learned: the lease served several streams", "lease", l.ID, "peak_bytes", l.PeakBytes, "max_bytes", l.MaxBytes)
		return
	}
	key := *l.EstimateKey
	_, driver := u.opts.Engine.Accounts() // not View: that copies every lease
	key.GPUModel, key.Driver = l.GPUName, estimator.DriverMajor(driver)
	if err := u.opts.Store.RecordPeak(key, l.PeakBytes); err != nil {
		u.log.Warn("cannot record measured peak", "lease", l.ID, "err", err)
		return
	}
	u.log.Info("learned a measured peak", "lease", l.ID, "key", key.String(), "peak_bytes", l.PeakBytes)
}

// Bounds of a plausible bare CUDA context: a process below the lower one
// has not created one; above the upper one it holds more than a context.
const (
	minContextBytes = 32 << 20
	maxContextBytes = 2 << 30
)

// SampleStart reads the GPUs right after a backend process started under
// lease id, before its Load (the whisper backend creates its CUDA context
// at start and allocates nothing else): the lease's measured use is that
// process's bare CUDA context, learned per GPU model and driver major
// (estimator.ContextKey) so later estimates on that GPU use it.
func (u *Upkeep) SampleStart(ctx context.Context, leaseID string) error {
	if err := u.Sample(ctx); err != nil {
		return err
	}
	v := u.opts.Engine.View()
	for _, g := range v.GPUs {
		for _, l := range g.Leases {
			if l.ID == leaseID {
				u.learnContext(l, v.Driver)
				return nil
			}
		}
	}
	return nil
}

func (u *Upkeep) learnContext(l placement.Lease, driver string) {
	if l.UsedBytes < minContextBytes || l.UsedBytes > maxContextBytes || l.GPUName == "" {
		u.log.Debug("no CUDA context learned at backend start", "lease", l.ID, "used_bytes", l.UsedBytes)
		return
	}
	key := estimator.ContextKey(l.GPUName, driver)
	if err := u.opts.Store.RecordContext(key, l.UsedBytes); err != nil {
		u.log.Warn("cannot record measured CUDA context", "lease", l.ID, "err", err)
		return
	}
	u.log.Info("learned a CUDA context", "lease", l.ID, "gpu", key, "bytes", l.UsedBytes)
}
