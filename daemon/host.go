package daemon

import (
	"os"
	"syscall"

	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/daemon/upkeep"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/plugins/host"
)

// The host reads the GPUs through upkeep after a backend starts (its CUDA
// context), loads, and finishes each job.
var _ host.StartSampler = (*upkeep.Upkeep)(nil)

// newHost builds the plugin host: backends run under leases of the
// daemon's engine, held by the daemon's own process.
func (d *Daemon) newHost() *host.Host {
	self := placement.Holder{PID: os.Getpid(), UID: os.Getuid(), Name: "wsched"}
	if info, err := procwatch.Read(d.procRoot, self.PID); err == nil {
		self.UID, self.StartTicks = info.UID, info.StartTicks
	}
	return host.New(host.Options{
		Config: d.cfg.Backends, Leases: d.eng, Holder: self, LeaseTTL: d.cfg.Leases.DefaultTTL.D(), Log: d.log,
		Sampler: d.upkeep, Cgroups: d.enforce.cgroups, Enforce: d.enforce.tiers.Env,
		Limits: d.enforce.attachLimits,
	})
}

// terminate sends SIGTERM to a holder that overran its lease ([leases]
// overrun = "kill").
func (d *Daemon) terminate(pid int) {
	if isSelf(pid) {
		d.log.Warn("a backend overran its lease; the daemon holds that lease and is not terminated", "pid", pid)
		return
	}
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Signal(syscall.SIGTERM)
	}
	d.log.Warn("terminating holder that overran its lease", "pid", pid, "err", err)
}

// isSelf reports whether pid is the daemon: the holder of every backend's
// lease, which must never be signalled for a backend's overrun.
func isSelf(pid int) bool { return pid == os.Getpid() }
