//go:build whisper

package whisper

import (
	"slices"
	"testing"
)

// TestDeviceKinds: a build with a GPU backend registry reads as cuda-capable
// even when the probe sees no GPU (CUDA_VISIBLE_DEVICES=""), which is how
// the host asks for Info.
func TestDeviceKinds(t *testing.T) {
	for _, tt := range []struct {
		name string
		devs []ggmlDevice
		regs []string
		want []string
	}{
		{"CPU build", []ggmlDevice{{name: "CPU"}}, []string{"CPU"}, []string{"cpu"}},
		{"CUDA build, no GPU visible", []ggmlDevice{{name: "CPU"}}, []string{"CUDA", "CPU"}, []string{"cpu", "cuda"}},
		{"CUDA build with a GPU", []ggmlDevice{{name: "CUDA0", gpu: true}, {name: "CPU"}}, []string{"CUDA", "CPU"}, []string{"cpu", "cuda"}},
		{"BLAS is not a GPU", nil, []string{"BLAS", "CPU"}, []string{"cpu"}},
	} {
		if got := deviceKinds(tt.devs, tt.regs); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	info, err := newBackend(t, Options{}).Info(t.Context())
	if err != nil || !slices.Contains(info.Devices, "cpu") || info.Metadata["ggml_backends"] == "" {
		t.Errorf("Info: %+v %v", info, err)
	}
	t.Logf("this build: ggml backends %s, devices %v", info.Metadata["ggml_backends"], info.Devices)
}
