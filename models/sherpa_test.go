package models

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/estimator/onnx/onnxtest"
	"github.com/wsched/wsched/internal/config"
)

// TestSherpaOnnxModels: a models_dir subdirectory holding a sherpa-onnx
// model is served as model DIRNAME by sherpa-onnx, and a [[models.model]]
// entry with backend "sherpa-onnx" names a directory; both estimate from
// their ONNX files, and a directory sherpa-onnx could not load says why.
func TestSherpaOnnxModels(t *testing.T) {
	dir := t.TempDir()
	sv := filepath.Join(dir, "sensevoice-small")
	other := filepath.Join(t.TempDir(), "sv2")
	broken := filepath.Join(t.TempDir(), "broken")
	for _, d := range []string{sv, other, broken, filepath.Join(dir, "notes")} {
		_ = os.MkdirAll(d, 0o755)
	}
	for _, d := range []string{sv, other} {
		if _, err := onnxtest.WriteSenseVoice(d, onnxtest.SenseVoiceOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := onnxtest.WriteSenseVoice(broken, onnxtest.SenseVoiceOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(broken, "tokens.txt")); err != nil { // none of the backend's layouts
		t.Fatal(err)
	}
	reg, err := Load(t.Context(), config.Models{Dir: dir, Entries: []config.Model{
		{Name: "configured", Backend: SherpaOnnx, Path: other},
		{Name: "broken", Backend: SherpaOnnx, Path: broken},
	}}, testBackends)
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.Names(); got != "broken, configured, sensevoice-small" {
		t.Fatalf("models %s (notes/ has no model: not listed)", got)
	}
	for _, name := range []string{"sensevoice-small", "configured"} {
		m, err := reg.Lookup(name)
		if err != nil || m.Backend != SherpaOnnx || len(m.ONNX) != 1 {
			t.Fatalf("%s: %+v %v", name, m, err)
		}
		req, err := m.EstimateRequest()
		if err != nil || req.Backend != estimator.SherpaOnnx || len(req.ONNX) != 1 {
			t.Fatalf("%s: estimate request %+v %v", name, req, err)
		}
		if _, err := estimator.Estimate(req); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	m, err := reg.Lookup("broken")
	if !errors.Is(err, ErrUnavailable) || m.ONNX != nil {
		t.Errorf("broken: %+v %v", m, err)
	}
	if _, err := m.EstimateRequest(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("broken estimate request: %v", err)
	}
	t.Logf("broken: %s", m.Problem)
}
