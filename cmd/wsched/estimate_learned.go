package main

import (
	"context"
	"fmt"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/api/convert"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/config"
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
