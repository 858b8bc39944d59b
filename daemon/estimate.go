package daemon

import (
	"context"
	"encoding/json"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/estimator"
)

// estimateForLease sizes a `model` lease request with the estimator (which
// learns from measured peaks of earlier leases with the same key).
func (d *Daemon) estimateForLease(body api.LeaseRequest) (estimator.Result, error) {
	req := estimator.Request{
		Backend: estimator.Backend(body.Backend), Model: body.Model, Precision: body.Precision,
		Beam: body.Beam, Batch: body.BatchSize, SegmentSeconds: body.SegmentSeconds,
	}
	res, err := d.estimateAnyGPU(req)
	if err != nil {
		return estimator.Result{}, badRequest("invalid_request", "model: %v", err)
	}
	return res, nil
}

// estimateAnyGPU estimates req for every GPU model on the machine (each
// with what it has learned for that model) and recommends the largest, since
// the placement engine has not chosen a GPU yet.
func (d *Daemon) estimateAnyGPU(req estimator.Request) (estimator.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if v, err := d.eng.View(ctx); err == nil {
		req.GPUs = gpuFree(v) // available by the accounting formula, for the fit lines
	}
	res, err := d.est.Estimate(req)
	if err != nil {
		return res, err
	}
	for _, g := range res.GPUs {
		res.RecommendedBytes = max(res.RecommendedBytes, g.RecommendedBytes)
	}
	return res, nil
}

// keyLabel encodes an estimate key for the lease's labels.
func keyLabel(k estimator.Key) string {
	b, _ := json.Marshal(k)
	return string(b)
}
