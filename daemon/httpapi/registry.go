package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/models"
	"github.com/wsched/wsched/placement"
)

// modelSize sizes a lease request that names a model: a model the daemon
// serves ([[models.model]] entry or models_dir file) by its entry's memory
// or its backend's estimate; any other name by the estimator's known
// models. A --backend that differs from the entry's asks the estimator by
// name.
func (s *Server) modelSize(ctx context.Context, body api.LeaseRequest) (int64, any, *estimator.Key, error) {
	m, found, served := s.registryModel(ctx, body)
	if found {
		if m.MemoryBytes > 0 { // configured: the operator knows best
			return m.MemoryBytes, api.ModelEstimate{Source: "memory", TotalBytes: m.MemoryBytes, RecommendedBytes: m.MemoryBytes}, nil, nil
		}
		if b, ok := m.RuleBytes(); ok { // its backend's own size rule
			return b, api.ModelEstimate{Source: "backend", TotalBytes: b, RecommendedBytes: b}, nil, nil
		}
		res, err := s.estimateEntry(m, body)
		if err != nil {
			if byName, nerr := s.estimateForLease(body); nerr == nil { // a known name whose entry cannot be read
				return byName.RecommendedBytes, byName, &byName.Key, nil
			}
			return 0, nil, nil, badRequest("invalid_request", "model %q (backend %s): %v; set memory in its [[models.model]] entry", m.Name, m.Backend, err)
		}
		return res.RecommendedBytes, res, &res.Key, nil
	}
	res, err := s.estimateForLease(body)
	if err != nil {
		if served != "" {
			return 0, nil, nil, badRequest("invalid_request", "model: %v; the daemon serves: %s", err, served)
		}
		return 0, nil, nil, badRequest("invalid_request", "model: %v", err)
	}
	return res.RecommendedBytes, res, &res.Key, nil
}

// registryModel looks the request's model up in a fresh registry scan;
// served lists the registry's names for error messages.
func (s *Server) registryModel(ctx context.Context, body api.LeaseRequest) (m models.Model, found bool, served string) {
	reg, err := s.registry(ctx)
	if err != nil {
		s.log.Warn("model registry", "err", err)
		return models.Model{}, false, ""
	}
	m, err = reg.Lookup(body.Model)
	if err != nil && !errors.Is(err, models.ErrUnavailable) {
		return models.Model{}, false, reg.Names()
	}
	if body.Backend != "" && !strings.EqualFold(body.Backend, m.Backend) {
		return models.Model{}, false, reg.Names()
	}
	return m, true, reg.Names()
}

// estimateEntry is the estimate for serving registry model m, with the
// request's estimator inputs over the entry's.
func (s *Server) estimateEntry(m models.Model, body api.LeaseRequest) (estimator.Result, error) {
	req, err := m.EstimateRequest()
	if err != nil {
		return estimator.Result{}, err
	}
	if body.Precision != "" {
		req.Precision = body.Precision
	}
	if body.Beam > 0 {
		req.Beam = body.Beam
	}
	if body.BatchSize > 0 {
		req.Batch = body.BatchSize
	}
	if body.SegmentSeconds > 0 {
		req.SegmentSeconds = body.SegmentSeconds
	}
	return s.est.EstimateAnyGPU(req)
}

// postPreview answers POST /v1/placement/preview: where a lease request
// would be placed now, granting nothing.
func (s *Server) postPreview(w http.ResponseWriter, r *http.Request) {
	var body api.LeaseRequest
	if err := decodeBody(w, r, &body, true); err != nil {
		writeError(w, err)
		return
	}
	dev, err := device.Parse(body.Device)
	if err != nil {
		writeError(w, badRequest("invalid_field", "field device: %v", err))
		return
	}
	prio, err := placement.ParsePriority(body.Priority)
	if err != nil {
		writeError(w, badRequest("invalid_field", "field priority: %q is not allowed: want high, normal or low", body.Priority))
		return
	}
	bytes, est, _, err := s.leaseSize(r.Context(), body, dev)
	if err != nil {
		writeError(w, err)
		return
	}
	p := s.eng.Preview(bytes, dev, prio)
	out := api.PlacementPreview{MemoryBytes: bytes, Fits: p.Fits, GPUIndex: p.Account.Index, Policy: string(s.cfg.Placement.Policy),
		Reason: p.Reason, Estimate: est, AvailableBytes: max(0, p.AvailableBytes), HeldBytes: p.HeldBytes}
	switch {
	case p.CPU:
		out.Device, out.GPUIndex = "cpu", -1
	case p.Account.Index >= 0:
		out.Device = device.Spec{Kind: device.Index, Index: p.Account.Index}.String()
		out.GPUUUID, out.GPUName = p.Account.UUID, p.Account.Name
	}
	writeJSON(w, http.StatusOK, out)
}

// getRegistry answers GET /v1/models/registry: the daemon's models, the
// memory a lease for each gets (its entry's memory, or the estimate) and
// its fit on each GPU now.
func (s *Server) getRegistry(w http.ResponseWriter, r *http.Request) {
	reg, err := s.registry(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := api.Registry{ModelsDir: reg.Dir(), GPUs: s.newRequestRoom(), Models: []api.RegistryModel{}, Partial: reg.Partials()}
	for _, m := range reg.Models() {
		out.Models = append(out.Models, s.registryEntry(m, out.GPUs))
	}
	writeJSON(w, http.StatusOK, out)
}

// newRequestRoom is each GPU with what a new request can get: available
// memory (0 when not placeable) less the memory held for waiting requests.
func (s *Server) newRequestRoom() []api.EstimateGPU {
	out := []api.EstimateGPU{}
	for _, g := range s.eng.View().GPUs {
		avail := max(0, g.AvailableBytes-g.HeldBytes)
		if !g.Placeable {
			avail = 0
		}
		out = append(out, api.EstimateGPU{Index: g.Index, Name: g.Name, AvailableBytes: avail})
	}
	return out
}

// registryEntry is one model of GET /v1/models/registry.
func (s *Server) registryEntry(m models.Model, gpus []api.EstimateGPU) api.RegistryModel {
	out := api.RegistryModel{Name: m.Name, Backend: m.Backend, Path: m.Path, SizeBytes: m.SizeBytes, Origin: string(m.Origin),
		Problem: m.Problem, Shadows: m.Shadows, MemoryBytes: m.MemoryBytes}
	if m.MemoryBytes > 0 {
		out.Estimate = &api.ModelEstimate{Source: "memory", TotalBytes: m.MemoryBytes, RecommendedBytes: m.MemoryBytes, GPUs: fitMemory(m.MemoryBytes, gpus)}
		return out
	}
	if b, ok := m.RuleBytes(); ok {
		out.Estimate = &api.ModelEstimate{Source: "backend", TotalBytes: b, RecommendedBytes: b, GPUs: fitMemory(b, gpus)}
		return out
	}
	req, err := m.EstimateRequest()
	if err == nil {
		req.GPUs = make([]estimator.GPUFree, 0, len(gpus))
		for _, g := range gpus {
			req.GPUs = append(req.GPUs, estimator.GPUFree{Index: g.Index, Name: g.Name, AvailableBytes: g.AvailableBytes})
		}
		var res estimator.Result
		if res, err = s.est.Estimate(req); err == nil {
			e := &api.ModelEstimate{Source: "estimator", Precision: res.Precision, TotalBytes: res.TotalBytes, RecommendedBytes: res.RecommendedBytes, GPUs: []api.ModelFit{}}
			for _, g := range res.GPUs {
				e.GPUs = append(e.GPUs, api.ModelFit{Index: g.Index, Name: g.Name, AvailableBytes: g.AvailableBytes,
					RecommendedBytes: g.RecommendedBytes, Sufficient: g.Sufficient, Copies: g.Copies})
			}
			out.Estimate = e
		}
	}
	if err != nil && m.Available() {
		out.EstimateError = err.Error()
	}
	return out
}

// fitMemory is whether a fixed lease size fits on each GPU and how many
// copies would.
func fitMemory(bytes int64, gpus []api.EstimateGPU) []api.ModelFit {
	out := make([]api.ModelFit, 0, len(gpus))
	for _, g := range gpus {
		f := api.ModelFit{Index: g.Index, Name: g.Name, AvailableBytes: g.AvailableBytes, RecommendedBytes: bytes}
		if bytes > 0 {
			f.Copies = g.AvailableBytes / bytes
		}
		f.Sufficient = f.Copies > 0
		out = append(out, f)
	}
	return out
}
