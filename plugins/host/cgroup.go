package host

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/wsched/wsched/internal/cgroup"
)

// cgroupFor makes w's cgroup (nil without Options.Cgroups, or when it
// cannot be made: the backend then runs in the daemon's).
func (h *Host) cgroupFor(w *worker) *cgroup.Group {
	if h.opts.Cgroups == nil {
		return nil
	}
	g, err := h.opts.Cgroups.New("backend-" + w.lease.ID + "-" + w.id)
	if err != nil {
		w.log.Warn("backend runs without a cgroup of its own", "err", err)
		return nil
	}
	if h.opts.Limits != nil {
		g.OnRemove(h.opts.Limits(w.lease, g.Dir()))
	}
	return g
}

// removeCgroup kills what is left in g (children that outlived the backend)
// and removes it.
func removeCgroup(g *cgroup.Group, log *slog.Logger) {
	if g == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Remove(ctx); err != nil {
		log.Warn("backend cgroup not removed", "cgroup", g.Dir(), "err", err)
	}
}

// withCgroupPIDs adds the processes in p's cgroup to pids (what the backend
// reports): whatever the backend started counts against its lease, found
// by the cgroup rather than by parent chains.
func (p *process) withCgroupPIDs(pids []int) []int {
	in, err := p.cg.PIDs()
	if err != nil || len(in) == 0 {
		return pids
	}
	return append(slices.Clone(pids), in...)
}
