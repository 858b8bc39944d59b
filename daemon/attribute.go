package daemon

import (
	"context"

	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/placement/inventory"
)

// maxAncestry bounds the parent walk when attributing a process to a lease.
const maxAncestry = 32

// attributeChildren counts GPU processes started by a lease's holder (a
// Python app's worker processes under `wsched run`, say) against that lease:
// for each process NVML lists that no lease claims, it walks the parent
// chain in /proc until it meets a lease's holder or registered PID.
func (d *Daemon) attributeChildren(ctx context.Context, snap inventory.Snapshot) {
	v, err := d.eng.View(ctx)
	if err != nil {
		return
	}
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
		return
	}
	for _, g := range snap.GPUs {
		for _, p := range g.Processes {
			if _, claimed := owner[p.PID]; claimed {
				continue
			}
			if id, ok := d.ancestorLease(p.PID, owner); ok {
				if _, err := d.eng.AddPID(ctx, id, p.PID); err == nil {
					owner[p.PID] = id
					_ = d.watch.Watch(p.PID)
					d.log.Info("process attributed to lease by parentage", "pid", p.PID, "lease", id)
				}
			}
		}
	}
}

func (d *Daemon) ancestorLease(pid int, owner map[int]string) (string, bool) {
	for i := 0; i < maxAncestry && pid > 1; i++ {
		info, err := procwatch.Read(d.procRoot, pid)
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
