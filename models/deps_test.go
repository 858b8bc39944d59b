package models

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoBackendImplementation: the model registry and the job runner know
// backends only by their descriptors: neither links a backend's package.
func TestNoBackendImplementation(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".", "../jobs/runner").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, backend := range []string{"/plugins/whisper", "/plugins/sherpa", "/plugins/execbackend"} {
			if strings.Contains(p, "github.com/wsched/wsched"+backend) {
				t.Errorf("models or jobs/runner links %s", p)
			}
		}
	}
}
