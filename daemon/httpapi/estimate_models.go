package httpapi

import (
	"context"
	"errors"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/models"
)

// fromRegistry completes an estimate request that names a registered model
// (POST /v1/estimate {"backend": "sherpa-onnx", "model": "sensevoice"}) with
// what its backend's descriptor and the model's files say, as jobs on it
// are sized: the profile, the ggml header or ONNX files, best_of, flash
// attention. A request that names no registered model, or a profile other
// than the model's, is left as it is (the estimator knows model names).
func (s *Server) fromRegistry(ctx context.Context, req *estimator.Request) error {
	if req.Model == "" || req.Header != nil || req.ONNX != nil {
		return nil
	}
	reg, err := s.registry(ctx)
	if err != nil {
		return err
	}
	m, err := reg.Lookup(req.Model)
	if errors.Is(err, models.ErrUnknownModel) {
		return nil
	}
	if err != nil {
		return err
	}
	mreq, err := m.EstimateRequest()
	if err != nil || (req.Backend != "" && req.Backend != mreq.Backend) {
		return nil
	}
	req.Backend, req.Model, req.Header, req.ONNX = mreq.Backend, mreq.Model, mreq.Header, mreq.ONNX
	if req.BestOf == 0 {
		req.BestOf = mreq.BestOf
	}
	if req.FlashAttention == nil {
		req.FlashAttention = mreq.FlashAttention
	}
	return nil
}
