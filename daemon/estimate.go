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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if snap, err := d.reader.Fresh(ctx); err == nil && len(snap.GPUs) > 0 {
		req.GPUModel = snap.GPUs[0].Name
	}
	res, err := d.est.Estimate(req)
	if err != nil {
		return estimator.Result{}, badRequest("invalid_request", "model: %v", err)
	}
	return res, nil
}

// keyLabel encodes an estimate key for the lease's labels.
func keyLabel(k estimator.Key) string {
	b, _ := json.Marshal(k)
	return string(b)
}
