package main

import (
	"strings"
	"testing"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/plugins/sherpa/modeldir"
)

// TestRenderDescriptor: `wsched backends` says under each backend what its
// descriptor says: the backend name, sizing, models_dir layouts, a CPU-only
// build (no GPU memory leased), the options.
func TestRenderDescriptor(t *testing.T) {
	d := modeldir.Descriptor()
	d.Plugin, d.Devices = "sherpa", []string{"cpu"}
	b := api.Backends{Backends: []api.Backend{{Name: "sherpa", Path: "/p/wsched-backend-sherpa", Devices: d.Devices, Descriptor: &d}}}
	var out strings.Builder
	if err := renderBackends(&out, b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`serves backend "sherpa-onnx"; sized by the estimator's sherpa-onnx profile`,
		"models_dir: NAME/{tokens.txt|*tokens.txt, model.onnx|model.int8.onnx}",
		"cpu only: this build cannot use CUDA; its instances run on the CPU and lease no GPU memory",
		"option language (auto|zh|en|ja|ko|yue): SenseVoice's language",
		"option itn (bool): inverse text normalization",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
