package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"

	"github.com/wsched/wsched/enforce"
	"github.com/wsched/wsched/enforce/nvmllimits"
	"github.com/wsched/wsched/enforce/preload"
	"github.com/wsched/wsched/internal/cgroup"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// enforcement is how the daemon holds leases to their size (issue 27): the
// tier chosen per GPU at start, and the cgroups its backends run in.
type enforcement struct {
	tiers   *enforce.Enforcer
	cgroups *cgroup.Manager     // nil: no writable hierarchy
	mps     *enforce.MPSControl // [enforcement] mps = "manage": the one started
	// limits sets the driver's limits on the holders' cgroups where a GPU's
	// tier is nvml-limits (nil: none is).
	limits *enforce.Limits
	nvml   *nvmllimits.Lib
	stop   context.CancelFunc // ends limits' goroutines
}

// newEnforcement reads the driver version and each GPU's MIG mode once,
// probes the host, chooses each GPU's tier under [enforcement] mode and
// logs which and why; it opens the cgroup the backends' cgroups go under.
func (d *Daemon) newEnforcement() enforcement {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap, err := d.provider.Snapshot(ctx)
	if err != nil {
		d.log.Warn("enforcement: no GPU reading at start; tiers are chosen without the driver version", "err", err)
	}
	gpus := map[string]bool{}
	for _, g := range snap.GPUs {
		gpus[g.UUID] = g.MIG == inventory.MIGEnabled
	}
	cfg := d.cfg.Enforcement
	var e enforcement
	lookup := os.LookupEnv
	if cfg.MPS == "manage" {
		if e.mps, err = d.startMPS(ctx); err != nil {
			d.log.Warn(`enforcement: [enforcement] mps = "manage" but no MPS control daemon started`, "err", err)
		} else {
			lookup = e.mps.LookupEnv(lookup)
		}
	}
	facts := enforce.Probe(d.procRoot, snap.Driver, lookup, preload.Dirs(), nvmllimits.DefaultLibrary)
	facts.MPSOff = cfg.MPS == "off"
	if d.facts != nil {
		facts = d.facts(facts)
	}
	e.tiers = enforce.NewEnforcer(cfg.Mode, facts, gpus, cfg.Borrow.Int64(), d.cfg.Daemon.Socket)
	for _, g := range snap.GPUs {
		c := e.tiers.For(g.UUID)
		d.log.Info("enforcement", "gpu", g.Index, "uuid", g.UUID, "mode", cfg.Mode, "tier", c.Tier, "why", c.Reason)
	}
	if len(snap.GPUs) == 0 {
		c := e.tiers.For("")
		d.log.Info("enforcement: no GPU at start; a GPU found later gets this tier", "mode", cfg.Mode, "tier", c.Tier, "why", c.Reason,
			"preload_library", facts.PreloadLib)
	}
	d.startLimits(&e, facts.NVMLLib)
	if e.cgroups, err = cgroup.Open(d.procRoot, fmt.Sprintf("wsched-holders-%d", os.Getpid())); err != nil {
		d.log.Info("backends run without cgroups of their own: children that setsid can outlive an instance", "err", err)
	} else {
		// A daemon killed outright (SIGKILL) left its backends' cgroups
		// and whatever survived in them: end those now.
		swept := e.cgroups.SweepStale(ctx, d.procRoot, "wsched-holders-")
		d.log.Debug("backends get cgroups of their own", "dir", e.cgroups.Dir(), "hierarchy", e.cgroups.Hierarchy().Version, "swept", swept)
	}
	return e
}

// startLimits opens the NVML library's memory-limits call when a GPU's tier
// is nvml-limits, and follows lease resizes on the engine.
func (d *Daemon) startLimits(e *enforcement, nvmlLib string) {
	limited := false
	for _, c := range e.tiers.Choices() {
		limited = limited || c.Tier == enforce.NVMLLimits
	}
	if !limited {
		return
	}
	lib, err := nvmllimits.Open(nvmlLib)
	if err != nil {
		d.log.Warn("enforcement: nvml-limits chosen but the NVML library did not open: limits are not set", "err", err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.nvml, e.stop = lib, cancel
	e.limits = enforce.NewLimits(lib, d.cfg.Enforcement.Borrow.Int64(), d.log)
	events := make(chan placement.Event)
	go e.limits.Run(ctx, events)
	go func() { // the engine answers once it runs (Daemon.Run)
		sub, unsub, err := d.eng.Subscribe(ctx, placement.EventResized, placement.EventReleased, placement.EventExpired)
		if err != nil {
			return
		}
		defer unsub()
		for ev := range sub {
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
}

// attachLimits sets the driver's limits for lease l on a holder's cgroup
// dir when l's GPU has the nvml-limits tier; the function it returns
// clears them (cgroup.Group.OnRemove).
func (e enforcement) attachLimits(l placement.Lease, dir string) func() {
	if e.limits == nil || e.tiers.For(l.GPU).Tier != enforce.NVMLLimits {
		return nil
	}
	return e.limits.Attach(l, dir)
}

// runGroup matches the cgroups `wsched run` makes for its child: a systemd
// scope, or a child group under the run's own.
var runGroup = regexp.MustCompile(`/wsched-run-[0-9]+(-[0-9]+\.scope|/child)$`)

// limitRunPID is what POST /v1/leases/{id}/pids calls (nil without the
// nvml-limits tier): a process of a lease on an nvml-limits GPU that is in
// a `wsched run` cgroup gets the lease's limits on that cgroup; they follow
// resizes and are cleared when the lease ends (if the cgroup is still there:
// removing it clears them too). Other cgroups are left alone — they may hold
// other processes than the lease's.
func (e enforcement) limitRunPID(procRoot string) func(placement.Lease, int) {
	if e.limits == nil {
		return nil
	}
	return func(l placement.Lease, pid int) {
		if e.tiers.For(l.GPU).Tier != enforce.NVMLLimits {
			return
		}
		if g, err := cgroup.Of(procRoot, pid); err == nil && runGroup.MatchString(g.Dir()) {
			e.limits.Attach(l, g.Dir())
		}
	}
}

// startMPS starts the MPS control daemon wsched manages, with its pipes in
// state_dir/mps.
func (d *Daemon) startMPS(ctx context.Context) (*enforce.MPSControl, error) {
	bin, err := exec.LookPath(enforce.MPSControlBin)
	if err != nil {
		return nil, err
	}
	m, err := enforce.StartMPS(ctx, bin, filepath.Join(d.cfg.Daemon.StateDir, "mps"))
	if err == nil {
		d.log.Info("MPS control daemon started", "pipe", m.PipeDir)
	}
	return m, err
}

// close stops a managed MPS control daemon and removes the backends'
// parent cgroup when no other daemon of this process (tests) still uses it.
func (e enforcement) close(log *slog.Logger) {
	if e.mps != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.mps.Stop(ctx); err != nil {
			log.Warn("MPS control daemon not stopped", "err", err)
		}
	}
	if e.cgroups != nil {
		_ = e.cgroups.Close()
	}
	if e.stop != nil {
		e.stop()
		_ = e.nvml.Close()
	}
}
