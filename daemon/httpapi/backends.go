package httpapi

import (
	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/host"
)

// backendsBody converts the host's status to GET /v1/backends.
func backendsBody(st host.Status) api.Backends {
	out := api.Backends{Dirs: st.Dirs, Backends: []api.Backend{}, Refused: []api.RefusedBackend{}, Instances: []api.BackendInstance{}}
	for _, b := range st.Backends {
		ab := api.Backend{
			Name: b.Name, Path: b.Path, Version: b.Info.Version, ModelFormats: b.Info.ModelFormats,
			Devices: b.Info.Devices, Metadata: b.Info.Metadata, Error: b.Err,
		}
		if !b.Descriptor.IsZero() {
			ab.Descriptor = &b.Descriptor
		}
		out.Backends = append(out.Backends, ab)
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
			Streams: i.Streams, MaxStreams: i.MaxStreams, PeakStreams: i.PeakStreams,
		}
		if i.GPU == placement.CPU {
			bi.GPUUUID = ""
		}
		out.Instances = append(out.Instances, bi)
	}
	return out
}

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
