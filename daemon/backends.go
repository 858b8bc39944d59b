package daemon

import (
	"context"
	"net/http"
	"os"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/host"
)

// newHost builds the plugin host: backends run under leases of the
// daemon's engine, held by the daemon's own process.
func (d *Daemon) newHost() *host.Host {
	self := placement.Holder{PID: os.Getpid(), UID: os.Getuid(), Name: "wsched"}
	if info, err := procwatch.Read(d.procRoot, self.PID); err == nil {
		self.UID, self.StartTicks = info.UID, info.StartTicks
	}
	return host.New(host.Options{
		Config: d.cfg.Backends, Leases: d.eng, Holder: self, LeaseTTL: d.cfg.Leases.DefaultTTL.D(), Log: d.log,
	})
}

// startHost runs the plugin host until the returned function is called,
// which stops its backends, releases their leases (the engine must still
// run) and waits.
func (d *Daemon) startHost(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.host.Run(ctx); err != nil {
			d.log.Error("plugin host stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}

func (d *Daemon) getBackends(w http.ResponseWriter, r *http.Request) {
	st, err := d.host.Status(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, backendsBody(st))
}

// backendsBody converts the host's status to GET /v1/backends.
func backendsBody(st host.Status) api.Backends {
	out := api.Backends{Dirs: st.Dirs, Backends: []api.Backend{}, Refused: []api.RefusedBackend{}, Instances: []api.BackendInstance{}}
	for _, b := range st.Backends {
		out.Backends = append(out.Backends, api.Backend{
			Name: b.Name, Path: b.Path, Version: b.Info.Version, ModelFormats: b.Info.ModelFormats,
			Devices: b.Info.Devices, Metadata: b.Info.Metadata, Error: b.Err,
		})
	}
	for _, r := range st.Refused {
		out.Refused = append(out.Refused, api.RefusedBackend{Path: r.Path, Reason: r.Reason})
	}
	for _, i := range st.Instances {
		bi := api.BackendInstance{
			ID: i.ID, Backend: i.Backend, Model: i.Model, State: string(i.State), Lease: i.Lease, GPUIndex: i.GPUIndex,
			GPUUUID: i.GPU, PID: i.PID, MemoryBytes: i.LeaseBytes, ReportedBytes: max(i.Memory.TotalBytes, i.Memory.Sum()),
			Started: i.Started, LastUsed: i.LastUsed, IdleSeconds: i.Idle.Seconds(), KeepAliveSeconds: i.KeepAlive.Seconds(),
			Restarts: i.Restarts, Failed: i.Failed, Metadata: i.Info.Metadata, Reported: reportMap(i.Memory),
		}
		if i.GPU == placement.CPU {
			bi.GPUUUID = ""
		}
		out.Instances = append(out.Instances, bi)
	}
	return out
}

// isSelf reports whether pid is the daemon: the holder of every backend's
// lease, which must never be signalled for a backend's overrun.
func isSelf(pid int) bool { return pid == os.Getpid() }

// reportMap flattens a backend's memory report for the API.
func reportMap(m plugins.MemoryReport) map[string]int64 {
	if m.Sum() == 0 {
		return nil
	}
	out := map[string]int64{"model": m.ModelBytes, "kv_self": m.KVSelfBytes, "kv_cross": m.KVCrossBytes, "kv_pad": m.KVPadBytes}
	for name, b := range m.ComputeBytes {
		out["compute_"+name] = b
	}
	return out
}
