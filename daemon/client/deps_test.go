package client

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the client small: it talks JSON over a socket and
// must not link the daemon's TOML config, NVML or engines.
func TestDependencies(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/wsched/wsched/daemon/client").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	banned := []string{"github.com/BurntSushi/toml", "github.com/NVIDIA/go-nvml", "github.com/wsched/wsched/placement",
		"github.com/wsched/wsched/jobs", "github.com/wsched/wsched/estimator", "github.com/wsched/wsched/internal/config"}
	for _, dep := range strings.Fields(string(out)) {
		for _, b := range banned {
			if (dep == b || strings.HasPrefix(dep, b+"/")) && dep != "github.com/wsched/wsched/jobs/transcript" {
				t.Errorf("daemon/client depends on %s", dep)
			}
		}
	}
}
