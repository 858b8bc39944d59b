package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/api/convert"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
)

// daemonSamples is an estimator.Store over what the daemon has measured
// (POST /v1/estimator/samples): wsched estimate applies the same learned
// peaks and CUDA contexts as the daemon's own sizing, with their counts in
// --explain.
type daemonSamples struct {
	ctx context.Context
	c   *client.Client
}

var _ estimator.Store = daemonSamples{}

func (d daemonSamples) Peaks(k estimator.Key) ([]int64, error) {
	key := convert.FromKey(k)
	return d.c.Samples(d.ctx, api.SamplesRequest{Key: &key})
}

func (d daemonSamples) Contexts(key string) ([]int64, error) {
	return d.c.Samples(d.ctx, api.SamplesRequest{Context: key})
}

// learnedProbeTimeout bounds the question whether a daemon answers.
const learnedProbeTimeout = 2 * time.Second

// learnedStore is the daemon's learned samples when a daemon answers on
// the socket, else nil; the line says which, for --explain.
func learnedStore(ctx context.Context, cfg *config.Config) (estimator.Store, string) {
	c := client.New(cfg.Daemon.Socket)
	pctx, cancel := context.WithTimeout(ctx, learnedProbeTimeout)
	defer cancel()
	if _, err := c.Samples(pctx, api.SamplesRequest{Context: "probe"}); err != nil {
		return nil, fmt.Sprintf("learning: no daemon answered on %s (%v); measured peaks not consulted, the formula applies", cfg.Daemon.Socket, err)
	}
	return daemonSamples{ctx: ctx, c: c}, fmt.Sprintf("learning: measured peaks and CUDA contexts from the daemon on %s", cfg.Daemon.Socket)
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
