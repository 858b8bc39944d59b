package main

import (
	"context"
	"fmt"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/models"
)

// daemonModels is the daemon's registry (GET /v1/models/registry): its
// models, the memory a lease for each gets and the fit on its GPUs now.
func daemonModels(ctx context.Context, socket string) (modelsView, error) {
	c := client.New(socket)
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, learnedProbeTimeout)
	defer cancel()
	reg, err := c.Registry(pctx)
	if err != nil {
		return modelsView{}, err
	}
	v := modelsView{Source: "daemon", ModelsDir: reg.ModelsDir, GPUs: []estimator.GPUFree{}, Models: []modelView{}, Partial: reg.Partial,
		Note: fmt.Sprintf("the daemon's models on %s; fits count its leases and the memory held for waiting requests", socket)}
	for _, g := range reg.GPUs {
		v.GPUs = append(v.GPUs, estimator.GPUFree(g))
	}
	for _, m := range reg.Models {
		v.Models = append(v.Models, modelFromDaemon(m))
	}
	return v, nil
}

func modelFromDaemon(m api.RegistryModel) modelView {
	v := modelView{Model: models.Model{Name: m.Name, Backend: m.Backend, Path: m.Path, SizeBytes: m.SizeBytes, Origin: models.Origin(m.Origin),
		Problem: m.Problem, Shadows: m.Shadows, MemoryBytes: m.MemoryBytes}, EstimateError: m.EstimateError}
	if e := m.Estimate; e != nil {
		v.Estimate = &modelEstimate{Source: e.Source, Precision: e.Precision, TotalBytes: e.TotalBytes, RecommendedBytes: e.RecommendedBytes, GPUs: []estimator.GPUFit{}}
		for _, g := range e.GPUs {
			v.Estimate.GPUs = append(v.Estimate.GPUs, estimator.GPUFit(g))
		}
	}
	return v
}
