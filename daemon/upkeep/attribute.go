package upkeep

import (
	"context"

	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// maxAncestry bounds the parent walk when attributing a process to a lease.
const maxAncestry = 32

// attribute finds the GPU processes started by a lease's holder (a Python
// app's worker processes under `wsched run`, say): for each process NVML
// lists that no lease claims, it walks the parent chain in /proc until it
// meets a lease's holder or registered PID. The engine is asked only about
// the processes in the reading and their ancestors, so a refresh costs what
// the GPUs run, not what is leased.
func (u *Upkeep) attribute(ctx context.Context, snap inventory.Snapshot) ([]placement.Attribution, error) {
	var pids []int
	for _, g := range snap.GPUs {
		for _, p := range g.Processes {
			pids = append(pids, p.PID)
		}
	}
	if len(pids) == 0 {
		return nil, nil
	}
	owner, leases, err := u.opts.Engine.Owners(ctx, pids)
	if err != nil || leases == 0 {
		return nil, err
	}
	chains := map[int][]procwatch.Info{} // unclaimed process → its ancestors, nearest first
	var ancestors []int
	for _, pid := range pids {
		if _, claimed := owner[pid]; claimed {
			continue
		}
		if _, done := chains[pid]; !done {
			chains[pid] = u.ancestry(pid)
			for _, a := range chains[pid] {
				ancestors = append(ancestors, a.PID)
			}
		}
	}
	if len(ancestors) == 0 {
		return nil, nil
	}
	up, _, err := u.opts.Engine.Owners(ctx, ancestors)
	if err != nil {
		return nil, err
	}
	var out []placement.Attribution
	for _, pid := range pids {
		for _, a := range chains[pid] {
			// An ancestor with a holder's PID but another start time
			// took the PID of a holder that exited: not the holder.
			if o, ok := up[a.PID]; ok && (o.StartTicks == 0 || a.StartTicks == 0 || o.StartTicks == a.StartTicks) {
				out = append(out, placement.Attribution{Lease: o.Lease, PID: pid})
				break
			}
		}
		delete(chains, pid) // a process listed on two GPUs is attributed once
	}
	return out, nil
}

// ancestry returns pid's parent chain from /proc, nearest first, up to
// maxAncestry long, each with its start time (0 for a parent /proc does not
// show, whose PID alone is then trusted, and which ends the chain).
func (u *Upkeep) ancestry(pid int) []procwatch.Info {
	var chain []procwatch.Info
	info, err := procwatch.Read(u.opts.ProcRoot, pid)
	for i := 0; i < maxAncestry && err == nil && info.PPID > 0; i++ {
		ppid := info.PPID
		if info, err = procwatch.Read(u.opts.ProcRoot, ppid); err != nil {
			info = procwatch.Info{PID: ppid}
		}
		chain = append(chain, info)
	}
	return chain
}
