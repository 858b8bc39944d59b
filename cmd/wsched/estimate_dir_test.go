package main

import (
	"strings"
	"testing"

	"github.com/wsched/wsched/estimator/onnx/onnxtest"
)

// TestEstimateSherpaOnnxDir: `wsched estimate --backend sherpa-onnx DIR
// --explain` reaches the sherpa-onnx profile through the backend's
// descriptor: the directory's ONNX files are read as its layout picks them.
func TestEstimateSherpaOnnxDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := onnxtest.WriteSenseVoice(dir, onnxtest.SenseVoiceOptions{}); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, nil, "estimate", "--config", seedSim, "--no-daemon", "--backend", "sherpa-onnx", dir, "--explain")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"backend      sherpa-onnx", "ONNX file(s)", "ONNX Runtime arena"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := runCLI(t, nil, "estimate", "--config", seedSim, "--no-daemon", "--model", dir); err == nil || !strings.Contains(err.Error(), "--backend sherpa-onnx") {
		t.Errorf("a directory with the whisper.cpp profile: %v", err)
	}
	if _, _, err := runCLI(t, nil, "estimate", "--config", seedSim, "--no-daemon", "--backend", "sherpa-onnx", t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds none of the layouts") {
		t.Errorf("an empty directory: %v", err)
	}
}
