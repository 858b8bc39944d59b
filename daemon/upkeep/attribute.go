package upkeep

import (
	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// maxAncestry bounds the parent walk when attributing a process to a lease.
const maxAncestry = 32

// attribute finds the GPU processes started by a lease's holder (a Python
// app's worker processes under `wsched run`, say): for each process NVML
// lists that no lease claims, it walks the parent chain in /proc until it
// meets a lease's holder or registered PID.
func (u *Upkeep) attribute(snap inventory.Snapshot, v placement.View) []placement.Attribution {
	owner := map[int]string{}
	for _, g := range v.GPUs {
		for _, l := range g.Leases {
			owner[l.Holder.PID] = l.ID
			for _, pid := range l.PIDs {
				owner[pid] = l.ID
			}
		}
	}
	if len(owner) == 0 {
		return nil
	}
	var out []placement.Attribution
	for _, g := range snap.GPUs {
		for _, p := range g.Processes {
			if _, claimed := owner[p.PID]; claimed {
				continue
			}
			if id, ok := u.ancestorLease(p.PID, owner); ok {
				owner[p.PID] = id
				out = append(out, placement.Attribution{Lease: id, PID: p.PID})
			}
		}
	}
	return out
}

func (u *Upkeep) ancestorLease(pid int, owner map[int]string) (string, bool) {
	for i := 0; i < maxAncestry && pid > 1; i++ {
		info, err := procwatch.Read(u.opts.ProcRoot, pid)
		if err != nil {
			return "", false
		}
		if id, ok := owner[info.PPID]; ok {
			return id, true
		}
		pid = info.PPID
	}
	return "", false
}
