package daemon

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

func toAPILeases(ls []placement.Lease) []api.Lease {
	out := make([]api.Lease, 0, len(ls))
	for _, l := range ls {
		out = append(out, convert.FromLease(l))
	}
	return out
}

// gpusBody is GET /v1/gpus: each GPU's reading, the one accounting formula,
// and its leases.
func (d *Daemon) gpusBody(v placement.View) api.GPUs {
	out := api.GPUs{Taken: v.Taken, Provider: v.Provider, Driver: v.Driver, Policy: string(d.cfg.Placement.Policy),
		GPUs: []api.GPU{}, CPU: toAPILeases(v.CPU), Queue: toAPILeases(v.Queue)}
	for _, g := range v.GPUs {
		out.GPUs = append(out.GPUs, convert.GPU(g.Reading, g.Account, toAPILeases(g.Leases)))
	}
	return out
}

func (d *Daemon) getGPUs(w http.ResponseWriter, r *http.Request) {
	v, err := d.eng.View(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d.gpusBody(v))
}

func (d *Daemon) getStatus(w http.ResponseWriter, r *http.Request) {
	v, err := d.eng.View(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	st := api.Status{
		Version: d.version, PID: os.Getpid(), Started: d.started, Socket: d.socket, StateDir: d.cfg.Daemon.StateDir,
		Provider: v.Provider, Policy: string(d.cfg.Placement.Policy), GPUs: len(v.GPUs), Leases: len(v.CPU),
		QueueLength: len(v.Queue), QueueByPrio: v.Queued, Stats: convert.Stats(v.Stats), SocketActivated: d.activated,
	}
	for _, g := range v.GPUs {
		st.Leases += len(g.Leases)
		st.LeasedBytes += g.LeasedBytes
	}
	writeJSON(w, http.StatusOK, st)
}

func (d *Daemon) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if err := d.eng.Ping(ctx); err != nil {
		writeError(w, &httpError{status: http.StatusServiceUnavailable, code: "unhealthy", err: fmt.Errorf("placement loop does not answer: %w", err)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// events streams placement events as Server-Sent Events until the client
// goes away or the daemon stops. A client that falls behind gets a final
// "lagged" event and should reconnect.
func (d *Daemon) events(w http.ResponseWriter, r *http.Request) {
	ch, cancel, err := d.eng.Subscribe(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	defer cancel()
	streamSSE(w, r, ch, func() string { return "lagged" }, func(ev placement.Event) (string, any) { return string(ev.Type), convert.FromEvent(ev) })
}

func (d *Daemon) postEstimate(w http.ResponseWriter, r *http.Request) {
	var req estimator.Request
	if err := decodeBody(w, r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	v, err := d.eng.View(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	if len(req.GPUs) == 0 {
		req.GPUs = gpuFree(v)
	}
	res, err := d.est.Estimate(req)
	if err != nil {
		writeError(w, badRequest("invalid_request", "%v", err))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func gpuFree(v placement.View) []estimator.GPUFree {
	out := []estimator.GPUFree{}
	for _, g := range v.GPUs {
		out = append(out, estimator.GPUFree{Index: g.Index, Name: g.Name, AvailableBytes: g.AvailableOrZero()})
	}
	return out
}
