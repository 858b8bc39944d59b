package client

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/wsched/wsched/daemon/api"
)

// Monitor follows GET /v1/monitor/events (what the monitor page and `wsched
// top` show), calling f with each frame until ctx ends, f returns an error,
// or the stream ends; ErrLagged when the daemon dropped a slow reader. The
// stream carries deltas; Monitor rebuilds the GPUs from them, so every
// placement frame (Placement.GPUs) and every "gpus" or "accounts" frame
// (GPUs) hands f the whole picture after it. f may keep the GPUs: later
// frames build new slices (copy on write), never change those handed out;
// f must not change them either.
func (c *Client) Monitor(ctx context.Context, f func(api.MonitorFrame) error) error {
	var st monitorState
	return c.stream(ctx, "/v1/monitor/events", func(event, data string) error {
		var fr api.MonitorFrame
		var v any
		var acc api.MonitorAccounts
		var rd api.MonitorReadings
		switch event {
		case "lagged":
			return ErrLagged
		case "snapshot":
			fr.Snapshot = &api.MonitorSnapshot{}
			v = fr.Snapshot
		case "placement":
			fr.Placement = &api.MonitorPlacement{}
			v = fr.Placement
		case "gpus":
			fr.GPUs = &api.GPUs{}
			v = fr.GPUs
		case "accounts":
			v = &acc
		case "readings":
			v = &rd
		case "job":
			fr.Job = &api.JobEvent{}
			v = fr.Job
		default:
			return nil // a frame type this client does not know
		}
		if err := json.Unmarshal([]byte(data), v); err != nil {
			return fmt.Errorf("decode %s frame: %w", event, err)
		}
		switch event {
		case "snapshot":
			st.GPUs = fr.Snapshot.GPUs
		case "gpus":
			st.GPUs = *fr.GPUs
		case "placement":
			st.applyEvent(fr.Placement.Event)
			fr.Placement.GPUs = st.GPUs
		case "accounts", "readings":
			if event == "accounts" {
				st.applyAccounts(acc)
			} else {
				st.applyReadings(rd)
			}
			gpus := st.GPUs
			fr.GPUs = &gpus
		}
		return f(fr)
	})
}

// monitorState is the GPUs a monitor client holds, rebuilt from the
// frames. apply* copy what they change (the GPU list, a lease list), so
// GPUs handed out before stay as they were.
type monitorState struct {
	GPUs api.GPUs
}

// applyEvent applies a placement event's lease: a queued request joins
// the queue, a granted lease its GPU (or the CPU list), an ended one
// leaves; any other change replaces the lease where it is.
func (m *monitorState) applyEvent(ev api.Event) {
	l := ev.Lease
	g := &m.GPUs
	g.GPUs = slices.Clone(g.GPUs)
	found := replaceLease(g, l)
	switch l.State {
	case "queued":
		if !found {
			g.Queue = append(slices.Clip(g.Queue), l)
		}
	case "granted":
		if found && !leaseMoved(g, l) {
			return
		}
		removeLease(g, l.ID)
		if i := gpuByUUID(g, l.GPUUUID); i >= 0 {
			g.GPUs[i].Leases = append(slices.Clip(g.GPUs[i].Leases), l)
		} else {
			g.CPU = append(slices.Clip(g.CPU), l)
		}
	default: // released, expired, rejected
		removeLease(g, l.ID)
	}
}

// applyAccounts adopts an "accounts" frame's accounts.
func (m *monitorState) applyAccounts(a api.MonitorAccounts) {
	g := &m.GPUs
	g.GPUs = slices.Clone(g.GPUs)
	for _, acc := range a.Accounts {
		if i := gpuByUUID(g, acc.UUID); i >= 0 {
			g.GPUs[i].Accounting = acc
		}
	}
}

// applyReadings adopts a "readings" frame's readings, accounts and holds.
func (m *monitorState) applyReadings(a api.MonitorReadings) {
	g := &m.GPUs
	g.Taken, g.Held, g.UIDs = a.Taken, a.Held, a.UIDs
	g.GPUs = slices.Clone(g.GPUs)
	for _, r := range a.GPUs {
		if i := gpuByUUID(g, r.UUID); i >= 0 {
			gpu := &g.GPUs[i]
			gpu.GPUReading, gpu.Accounting, gpu.HeldBytes = r.GPUReading, r.Accounting, r.HeldBytes
		}
	}
}

func gpuByUUID(g *api.GPUs, uuid string) int {
	for i := range g.GPUs {
		if uuid != "" && g.GPUs[i].UUID == uuid {
			return i
		}
	}
	return -1
}

// lists are the lease lists of g: each GPU's, the CPU's and the queue.
func lists(g *api.GPUs) []*[]api.Lease {
	out := make([]*[]api.Lease, 0, len(g.GPUs)+2)
	for i := range g.GPUs {
		out = append(out, &g.GPUs[i].Leases)
	}
	return append(out, &g.CPU, &g.Queue)
}

// replaceLease puts l in place of the lease with its ID, wherever it is.
func replaceLease(g *api.GPUs, l api.Lease) bool {
	for _, ls := range lists(g) {
		for i := range *ls {
			if (*ls)[i].ID == l.ID {
				*ls = slices.Clone(*ls)
				(*ls)[i] = l
				return true
			}
		}
	}
	return false
}

// leaseMoved reports whether granted lease l is not on the list its GPU
// says (a queued request just granted).
func leaseMoved(g *api.GPUs, l api.Lease) bool {
	want := &g.CPU
	if i := gpuByUUID(g, l.GPUUUID); i >= 0 {
		want = &g.GPUs[i].Leases
	}
	for _, x := range *want {
		if x.ID == l.ID {
			return false
		}
	}
	return true
}

func removeLease(g *api.GPUs, id string) {
	for _, ls := range lists(g) {
		for i := range *ls {
			if (*ls)[i].ID == id {
				*ls = append((*ls)[:i:i], (*ls)[i+1:]...)
				return
			}
		}
	}
}
