package models

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/plugins/descriptor"
)

// EstimateRequest is the estimator request for serving m, without GPUs:
// the profile its backend's descriptor names, with what the daemon read of
// its model (a ggml header's exact tensor sizes, ONNX initializer bytes) and
// the descriptor's sizing facts (best_of, the flash_attention option). A
// profile that reads no model file (pytorch, faster-whisper) needs a model
// name the estimator knows; a backend named like such a profile and
// described by no binary is sized by it too. A backend without a profile
// fails with ErrNoProfile, an unreadable model with ErrUnavailable.
func (m Model) EstimateRequest() (estimator.Request, error) {
	d := m.Descriptor
	profile := estimator.Backend(d.Profile)
	if profile == "" && d.IsZero() {
		profile = estimator.Backend(m.Backend)
	}
	switch {
	case profile == "":
		return estimator.Request{}, fmt.Errorf("estimate model %q: %q: %w", m.Name, m.Backend, ErrNoProfile)
	case d.Reads(descriptor.FormatGGML):
		if m.Header == nil {
			return estimator.Request{}, fmt.Errorf("estimate model %q: %s: %w", m.Name, m.Problem, ErrUnavailable)
		}
		req := estimator.Request{Backend: profile, Model: filepath.Base(m.Path), Header: m.Header, BestOf: d.BestOf}
		if _, ok := d.Option("flash_attention"); ok {
			fa := d.Resolve(m.Options)["flash_attention"] == "true"
			req.FlashAttention = &fa
		}
		return req, nil
	case d.Reads(descriptor.FormatONNX):
		if m.ONNX == nil {
			return estimator.Request{}, fmt.Errorf("estimate model %q: %s: %w", m.Name, m.Problem, ErrUnavailable)
		}
		return estimator.Request{Backend: profile, Model: m.Name, ONNX: m.ONNX}, nil
	case profile == estimator.Seed || !slices.Contains(estimator.Backends, profile):
		return estimator.Request{}, fmt.Errorf("estimate model %q: %q: %w", m.Name, m.Backend, ErrNoProfile)
	}
	if _, ok := estimator.LookupModel(m.Name); !ok {
		return estimator.Request{}, fmt.Errorf("estimate model %q: %s knows no model of that name: %w", m.Name, profile, estimator.ErrUnknownModel)
	}
	return estimator.Request{Backend: profile, Model: m.Name}, nil
}

// RuleBytes is the lease its backend's size rule gives m (a backend without
// an estimator profile that sizes its models by their size on disk); false
// when the backend has no such rule.
func (m Model) RuleBytes() (int64, bool) {
	d := m.Descriptor
	if d.Profile != "" || d.Memory == nil {
		return 0, false
	}
	return d.Memory.Bytes(m.SizeBytes), true
}
