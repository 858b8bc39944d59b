package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// gpuRoom is the GPUs with the memory a new request can get on each, the
// driver version, and whose view it is (source, for people).
type gpuRoom struct {
	gpus           []estimator.GPUFree
	driver, source string
	daemon         bool // the daemon's view
}

// estimateGPUs reads the GPUs: the daemon's view when daemon (nil:
// --no-daemon) answers — leases and the memory held for waiting requests
// counted — else a local reading by the accounting formula (no leases).
// only >= 0 keeps one GPU. Without --gpu a failing inventory only costs the
// GPU columns.
func (a *app) estimateGPUs(ctx context.Context, cfg *config.Config, only int, daemon *client.Client) (gpuRoom, error) {
	log := a.logger(cfg)
	why := "--no-daemon"
	var r gpuRoom
	var err error
	if daemon != nil {
		if r.gpus, r.driver, err = daemonGPUFree(ctx, daemon); err == nil {
			r.daemon = true
			r.source = fmt.Sprintf("gpus: the daemon's view on %s: leases and memory held for waiting requests counted", daemon.Socket())
		} else {
			why = fmt.Sprintf("no daemon answered on %s (%v)", daemon.Socket(), err)
		}
	}
	if !r.daemon {
		r.source = "gpus: local view (" + why + "): leases and memory held for waiting requests are not counted"
		if r.gpus, r.driver, err = readGPUs(ctx, cfg, log); err != nil {
			if only < 0 {
				log.Warn("estimating without GPUs", "err", err)
				r.gpus, r.driver = []estimator.GPUFree{}, ""
				return r, nil
			}
			return r, err
		}
	}
	if only < 0 {
		return r, nil
	}
	var indices []string
	for _, g := range r.gpus {
		if g.Index == only {
			r.gpus = []estimator.GPUFree{g}
			return r, nil
		}
		indices = append(indices, fmt.Sprint(g.Index))
	}
	return r, fmt.Errorf("estimate: --gpu %d: no such GPU (GPUs: %s)", only, orNone(strings.Join(indices, ", ")))
}

func readGPUs(ctx context.Context, cfg *config.Config, log *slog.Logger) ([]estimator.GPUFree, string, error) {
	p, _, err := inventory.Open(cfg.Inventory, log)
	if err != nil {
		return nil, "", err
	}
	defer p.Close()
	snap, err := p.Snapshot(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("read GPUs: %w", err)
	}
	gpus := []estimator.GPUFree{}
	for _, g := range snap.GPUs {
		acc := placement.Accounting(g, cfg.Placement, nil)
		free := estimator.GPUFree{Index: g.Index, Name: g.Name, AvailableBytes: acc.AvailableOrZero()}
		if !acc.Placeable {
			free.AvailableBytes = 0
		}
		gpus = append(gpus, free)
	}
	return gpus, snap.Driver, nil
}

// daemonGPUFree is each of the daemon's GPUs with what a new request can
// get there — available memory less the memory held for waiting requests,
// 0 where it does not place — and the driver version.
func daemonGPUFree(ctx context.Context, c *client.Client) ([]estimator.GPUFree, string, error) {
	pctx, cancel := context.WithTimeout(ctx, learnedProbeTimeout)
	defer cancel()
	g, err := c.GPUs(pctx)
	if err != nil {
		return nil, "", err
	}
	out := []estimator.GPUFree{}
	for _, d := range g.GPUs {
		free := estimator.GPUFree{Index: d.Index, Name: d.Name, AvailableBytes: max(0, d.Accounting.AvailableOrZero()-d.HeldBytes)}
		if !d.Accounting.Placeable {
			free.AvailableBytes = 0
		}
		out = append(out, free)
	}
	return out, g.Driver, nil
}

// daemonPlacement asks the daemon c (nil: none) where a lease of bytes
// would go now (on GPU only when only >= 0); nil without an answer.
func daemonPlacement(ctx context.Context, c *client.Client, bytes int64, only int) *api.PlacementPreview {
	if c == nil || bytes <= 0 {
		return nil
	}
	req := api.LeaseRequest{MemoryBytes: bytes}
	if only >= 0 {
		req.Device = fmt.Sprintf("cuda:%d", only)
	}
	pctx, cancel := context.WithTimeout(ctx, learnedProbeTimeout)
	defer cancel()
	p, err := c.Preview(pctx, req)
	if err != nil {
		return nil
	}
	return &p
}

// writePlacement says where the daemon would place the recommendation.
func writePlacement(w io.Writer, p *api.PlacementPreview) {
	switch {
	case p == nil:
	case p.Fits && p.GPUIndex >= 0:
		fmt.Fprintf(w, "placement: the daemon would place %s on GPU %d (%s), %s available: %s\n",
			units.FormatBytes(p.MemoryBytes), p.GPUIndex, p.GPUName, units.FormatBytes(p.AvailableBytes), p.Reason)
	case p.Fits:
		fmt.Fprintf(w, "placement: the daemon would run it on the CPU: %s\n", p.Reason)
	default:
		fmt.Fprintf(w, "placement: %s would wait in the daemon's queue: %s\n", units.FormatBytes(p.MemoryBytes), p.Reason)
	}
}
