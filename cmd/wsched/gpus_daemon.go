package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// localGPUs is the local inventory, opened on first use (a daemon that
// answers makes it unnecessary).
type localGPUs struct {
	cfg *config.Config
	log *slog.Logger
	p   inventory.Provider
}

func (l *localGPUs) snapshot(ctx context.Context) (inventory.Snapshot, error) {
	if l.p == nil {
		p, _, err := inventory.Open(l.cfg.Inventory, l.log)
		if err != nil {
			return inventory.Snapshot{}, err
		}
		l.p = p
	}
	snap, err := l.p.Snapshot(ctx)
	if err != nil {
		return snap, fmt.Errorf("read GPUs: %w", err)
	}
	return snap, nil
}

func (l *localGPUs) close() {
	if l.p != nil {
		l.p.Close()
	}
}

// gpusNow is the daemon's view when one answers (and noDaemon is false),
// else a local reading that says it is one.
func (a *app) gpusNow(ctx context.Context, cfg *config.Config, pin device.Pin, local *localGPUs, noDaemon bool) (gpusView, error) {
	why := "--no-daemon"
	if !noDaemon {
		v, err := daemonGPUs(ctx, cfg, pin)
		if err == nil {
			return v, nil
		}
		why = fmt.Sprintf("no daemon answered on %s (%v)", cfg.Daemon.Socket, err)
	}
	snap, err := local.snapshot(ctx)
	if err != nil {
		return gpusView{}, err
	}
	v := buildGPUsView(cfg, snap)
	v.Source = "local"
	v.Note = "local view: " + why + "; leases and memory held for waiting requests are not counted"
	leaseRelative(&v.Recommendation, pin)
	return v, nil
}

// daemonGPUs is the daemon's view (GET /v1/gpus) with the GPU it would
// place a new lease on (POST /v1/placement/preview).
func daemonGPUs(ctx context.Context, cfg *config.Config, pin device.Pin) (gpusView, error) {
	c := client.New(cfg.Daemon.Socket)
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, learnedProbeTimeout)
	defer cancel()
	g, err := c.GPUs(pctx)
	if err != nil {
		return gpusView{}, err
	}
	v := gpusView{Taken: g.Taken, Source: "daemon", Provider: g.Provider, Driver: g.Driver, Policy: g.Policy, GPUs: []gpuView{},
		Note: fmt.Sprintf("the daemon's view on %s: leases and memory held for waiting requests counted", cfg.Daemon.Socket)}
	accounts := make([]placement.Account, 0, len(g.GPUs))
	for _, d := range g.GPUs {
		gv := gpuView{GPU: readingOf(d.GPUReading), Accounting: placement.Account(d.Accounting), Leases: len(d.Leases), HeldBytes: d.HeldBytes}
		gv.DriverBytes = driverBytes(gv.GPU)
		v.GPUs = append(v.GPUs, gv)
		acc := gv.Accounting
		acc.AvailableBytes -= gv.HeldBytes
		accounts = append(accounts, acc)
	}
	req := api.LeaseRequest{}
	if pin.Var != "" {
		req.Device = pin.Spec.String()
	}
	if p, err := c.Preview(pctx, req); err == nil {
		v.Recommendation = previewRecommendation(p, pin)
	} else { // a daemon without the preview: the same pick over its accounts
		v.Recommendation = recommend(cfg, accounts)
	}
	leaseRelative(&v.Recommendation, pin)
	return v, nil
}

// readingOf converts a wire GPU reading.
func readingOf(r api.GPUReading) inventory.GPU {
	g := inventory.GPU{Index: r.Index, UUID: r.UUID, Name: r.Name, TotalBytes: r.TotalBytes, UsedBytes: r.UsedBytes, FreeBytes: r.FreeBytes,
		UtilizationPct: r.UtilizationPct, TemperatureC: r.TemperatureC, MIG: r.MIG, Health: r.Health, Reason: r.Reason}
	for _, p := range r.Processes {
		g.Processes = append(g.Processes, inventory.Process(p))
	}
	return g
}

// previewRecommendation is the daemon's placement preview as a
// recommendation.
func previewRecommendation(p api.PlacementPreview, pin device.Pin) recommendation {
	reason := "where the daemon would place a new lease: " + p.Reason
	switch {
	case p.Device == "cpu":
		return cpuRecommendation(reason)
	case p.GPUIndex < 0:
		return recommendation{Device: orDefault(pin.Spec.String(), "auto"), Reason: reason, Warning: p.Reason,
			Export: "export SENSEVOICE_DEVICE=" + orDefault(strings.TrimSpace(pin.Raw), "auto")}
	}
	idx := p.GPUIndex
	r := recommendation{Device: p.Device, Index: &idx, UUID: p.GPUUUID, Name: p.GPUName, AvailableBytes: p.AvailableBytes,
		Export: "export SENSEVOICE_DEVICE=" + p.Device, Reason: reason}
	if !p.Fits {
		r.Warning = p.Reason
	}
	return r
}

// leaseRelative rewrites a recommendation for a process inside a lease:
// the leased GPU is the one its CUDA_VISIBLE_DEVICES shows, as the cuda:N
// the lease exported.
func leaseRelative(r *recommendation, pin device.Pin) {
	if !pin.Relative || r.Index == nil {
		return
	}
	rel := strings.ToLower(strings.TrimSpace(pin.Raw))
	r.Export = "export SENSEVOICE_DEVICE=" + rel
	r.Reason = fmt.Sprintf("the GPU of lease %s: %s=%s with CUDA_VISIBLE_DEVICES=%s is GPU %d on this machine",
		pin.Lease, pin.Var, pin.Raw, strings.Join(pin.Visible, ","), *r.Index)
}
