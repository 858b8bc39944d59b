package models

import (
	"fmt"
	"path/filepath"

	"github.com/wsched/wsched/estimator"
)

// EstimateRequest is the estimator request for serving m, without GPUs:
// whisper.cpp models bring their ggml header (exact tensor sizes),
// sherpa-onnx directories their ONNX files (initializer bytes); a
// backend that is itself an estimator profile (pytorch, faster-whisper)
// needs a model name the estimator knows. Other backends fail with
// ErrNoProfile, an unreadable whisper.cpp file or sherpa-onnx directory
// with ErrUnavailable.
func (m Model) EstimateRequest() (estimator.Request, error) {
	if m.Backend == WhisperCpp {
		if m.Header == nil {
			return estimator.Request{}, fmt.Errorf("estimate model %q: %s: %w", m.Name, m.Problem, ErrUnavailable)
		}
		return estimator.Request{Backend: estimator.WhisperCpp, Model: filepath.Base(m.Path), Header: m.Header}, nil
	}
	if m.Backend == SherpaOnnx {
		if m.ONNX == nil {
			return estimator.Request{}, fmt.Errorf("estimate model %q: %s: %w", m.Name, m.Problem, ErrUnavailable)
		}
		return estimator.Request{Backend: estimator.SherpaOnnx, Model: m.Name, ONNX: m.ONNX}, nil
	}
	for _, b := range estimator.Backends {
		if string(b) != m.Backend || b == estimator.Seed {
			continue
		}
		if _, ok := estimator.LookupModel(m.Name); !ok {
			return estimator.Request{}, fmt.Errorf("estimate model %q: %s knows no model of that name: %w", m.Name, b, estimator.ErrUnknownModel)
		}
		return estimator.Request{Backend: b, Model: m.Name}, nil
	}
	return estimator.Request{}, fmt.Errorf("estimate model %q: %q: %w", m.Name, m.Backend, ErrNoProfile)
}
