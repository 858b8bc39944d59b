// Package convert builds daemon/api's wire types from the placement
// engine's values. The daemon uses it; clients never need it.
package convert

import (
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// FromLease converts an engine lease; granted leases carry their
// environment (placement.Env).
func FromLease(l placement.Lease) api.Lease {
	out := api.Lease{
		ID: l.ID, State: string(l.State), GPUIndex: l.GPUIndex, GPUUUID: l.GPU, GPUName: l.GPUName,
		MemoryBytes: l.Bytes, Device: l.Device.String(), Priority: l.Priority.String(), Holder: api.Holder(l.Holder),
		PIDs: l.PIDs, TTLSeconds: l.TTL.Seconds(), Created: l.Created, Granted: optTime(l.Granted),
		Expires: optTime(l.Expires), Ended: optTime(l.Ended), Reason: l.Reason, UsedBytes: l.UsedBytes, PeakBytes: l.PeakBytes,
		Overrun: l.Overrun, Labels: l.Labels, GPUTotalBytes: l.GPUTotalBytes,
		Reclaimable: l.Reclaimable, ReclaimableSince: optTime(l.ReclaimableSince),
	}
	if l.GPU == placement.CPU {
		out.GPUUUID = ""
	}
	if k := l.EstimateKey; k != nil {
		key := FromKey(*k)
		out.EstimateKey = &key
	}
	if l.State == placement.StateGranted {
		out.Env = placement.Env(l)
	}
	return out
}

// FromEvent converts an engine event (without Env: events are broadcast).
func FromEvent(e placement.Event) api.Event {
	l := FromLease(e.Lease)
	l.Env = nil
	return api.Event{Seq: e.Seq, Time: e.Time, Type: string(e.Type), Lease: l, Reason: e.Reason}
}

// GPU combines a GPU's reading, its accounting and its leases.
func GPU(g inventory.GPU, a placement.Account, leases []api.Lease) api.GPU {
	r := api.GPUReading{
		Index: g.Index, UUID: g.UUID, Name: g.Name, TotalBytes: g.TotalBytes, UsedBytes: g.UsedBytes, FreeBytes: g.FreeBytes,
		UtilizationPct: g.UtilizationPct, TemperatureC: g.TemperatureC, MIG: g.MIG, Health: g.Health, Reason: g.Reason,
		Processes: make([]api.GPUProcess, 0, len(g.Processes)),
	}
	for _, p := range g.Processes {
		r.Processes = append(r.Processes, api.GPUProcess(p))
	}
	if g.Processes == nil {
		r.Processes = nil
	}
	return api.GPU{GPUReading: r, Accounting: api.Account(a), Leases: leases}
}

// Stats converts the engine's event counters.
func Stats(s placement.Stats) api.Stats { return api.Stats(s) }

// FromKey converts an estimator key.
func FromKey(k estimator.Key) api.EstimateKey {
	return api.EstimateKey{Backend: string(k.Backend), Model: k.Model, Precision: k.Precision,
		Beam: k.Beam, Batch: k.Batch, GPUModel: k.GPUModel, Driver: k.Driver, Part: k.Part}
}

// ToKey converts a wire estimate key.
func ToKey(k api.EstimateKey) estimator.Key {
	return estimator.Key{Backend: estimator.Backend(k.Backend), Model: k.Model, Precision: k.Precision,
		Beam: k.Beam, Batch: k.Batch, GPUModel: k.GPUModel, Driver: k.Driver, Part: k.Part}
}
