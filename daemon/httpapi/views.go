package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/api/convert"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/placement"
)

func toAPILeases(peer Peer, ls []placement.Lease) []api.Lease {
	out := make([]api.Lease, 0, len(ls))
	for _, l := range ls {
		out = append(out, leaseFor(peer, l))
	}
	return out
}

// eventFor is an event as peer may see it (labels: see leaseFor).
func eventFor(peer Peer, ev placement.Event) api.Event {
	out := convert.FromEvent(ev)
	out.Lease = leaseFor(peer, ev.Lease)
	return out
}

// gpusBody is GET /v1/gpus: each GPU's reading, the one accounting formula,
// and its leases.
func (s *Server) gpusBody(peer Peer, v placement.View) api.GPUs {
	out := api.GPUs{Taken: v.Taken, Provider: v.Provider, Driver: v.Driver, Policy: string(s.cfg.Placement.Policy),
		GPUs: []api.GPU{}, CPU: toAPILeases(peer, v.CPU), Queue: toAPILeases(peer, v.Queue), Held: []api.Hold{}}
	index := map[string]int{}
	for _, g := range v.GPUs {
		gpu := convert.GPU(g.Reading, g.Account, toAPILeases(peer, g.Leases))
		gpu.HeldBytes, gpu.Enforcement = g.HeldBytes, s.enforcementOf(g.UUID)
		out.GPUs = append(out.GPUs, gpu)
		index[g.UUID] = g.Index
	}
	for _, h := range v.Held {
		out.Held = append(out.Held, api.Hold{LeaseID: h.LeaseID, GPUIndex: index[h.GPU], GPUUUID: h.GPU, Bytes: h.Bytes})
	}
	out.UIDs = uidUses(v.UIDs)
	return out
}

// uidUses converts the engine's per-uid rows to the wire type.
func uidUses(us []placement.UIDUse) []api.UIDUse {
	out := make([]api.UIDUse, 0, len(us))
	for _, u := range us {
		out = append(out, api.UIDUse(u))
	}
	return out
}

func (s *Server) getGPUs(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.gpusBody(peerFrom(r.Context()), s.eng.View()))
}

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.statusBody())
}

func (s *Server) statusBody() api.Status {
	v := s.eng.Summary() // counts and sums: no lease is copied
	return api.Status{
		Version: s.info.Version, PID: os.Getpid(), Started: s.info.Started, Socket: s.info.Socket, StateDir: s.cfg.Daemon.StateDir,
		Provider: v.Provider, Policy: string(s.cfg.Placement.Policy), GPUs: v.GPUs, Leases: v.Leases,
		QueueLength: v.Queued, QueueByPrio: v.QueuedBy, Stats: convert.Stats(v.Stats), SocketActivated: s.info.SocketActivated,
		LeasedBytes: v.LeasedBytes, HeldBytes: v.HeldBytes, UIDs: uidUses(v.UIDs), Enforcement: s.enforcements(),
	}
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if err := s.eng.Ping(ctx); err != nil {
		writeError(w, &httpError{status: http.StatusServiceUnavailable, code: "unhealthy", err: fmt.Errorf("placement loop does not answer: %w", err)})
		return
	}
	d := s.disk()
	status := "ok"
	switch {
	case d.Err != "":
		status = "disk_unknown"
	case d.Low:
		status = "disk_low"
	case d.SpoolQuota > 0 && d.SpoolUsed >= d.SpoolQuota:
		status = "spool_full"
	}
	// 200 either way: uploads are refused, leases still work; a restart
	// would not free the disk.
	writeJSON(w, http.StatusOK, map[string]any{"status": status, "disk": d})
}

// events streams placement events as Server-Sent Events until the client
// goes away or the daemon stops. A client that falls behind gets a final
// "lagged" event and should reconnect.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	ch, cancel, err := s.hub.subscribe(r.Context(), peerFrom(r.Context()))
	if err != nil {
		writeError(w, err)
		return
	}
	defer cancel()
	peer := peerFrom(r.Context())
	streamSSE(w, r, ch, func() string { return "lagged" }, func(ev placement.Event) (string, any) { return string(ev.Type), eventFor(peer, ev) })
}

func (s *Server) postEstimate(w http.ResponseWriter, r *http.Request) {
	var req estimator.Request
	if err := decodeBody(w, r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if err := estimator.CheckConcurrency("concurrency", req.Concurrency); err != nil {
		writeError(w, badRequest("invalid_request", "%v", err))
		return
	}
	if err := s.fromRegistry(r.Context(), &req); err != nil {
		writeError(w, badRequest("invalid_request", "model %q: %v", req.Model, err))
		return
	}
	res, err := s.est.Estimate(req)
	if err != nil {
		writeError(w, badRequest("invalid_request", "%v", err))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// postSamples answers what was measured for an estimate key or a CUDA
// context key.
func (s *Server) postSamples(w http.ResponseWriter, r *http.Request) {
	var req api.SamplesRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if (req.Key == nil) == (req.Context == "") {
		writeError(w, badRequest("invalid_request", "give exactly one of key and context"))
		return
	}
	out := api.Samples{Samples: []int64{}}
	if s.learned != nil {
		var got []int64
		var err error
		if req.Key != nil {
			got, err = s.learned.Peaks(convert.ToKey(*req.Key))
		} else {
			got, err = s.learned.Contexts(req.Context)
		}
		if err != nil {
			writeError(w, fmt.Errorf("read learned samples: %w", err))
			return
		}
		out.Samples = append(out.Samples, got...)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getBackends(w http.ResponseWriter, r *http.Request) {
	st, err := s.backends.Status(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, backendsBody(st))
}
