package deviceplugin

import (
	"os"
	"strings"
	"testing"

	"github.com/wsched/wsched/internal/config"
)

// TestManifestConfig: the wsched.toml in the Kubernetes ConfigMap is a valid
// configuration with the socket the DaemonSet's containers share.
func TestManifestConfig(t *testing.T) {
	data, err := os.ReadFile("../../packaging/kubernetes/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "wsched.toml: |\n")
	if !ok {
		t.Fatal("configmap.yaml has no wsched.toml block")
	}
	var toml strings.Builder
	for line := range strings.Lines(block) {
		if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "    ") {
			break
		}
		toml.WriteString(strings.TrimPrefix(line, "    "))
	}
	cfg, err := config.Parse([]byte(toml.String()), "configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Daemon.Socket != "/run/wsched/wsched.sock" || int64(cfg.Kubernetes.Unit) != GiB {
		t.Fatalf("socket %q, unit %d", cfg.Daemon.Socket, cfg.Kubernetes.Unit)
	}
}
