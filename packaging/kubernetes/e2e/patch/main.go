// Command patch turns packaging/kubernetes/*.yaml into what the e2e's
// GPU-less, registry-less node can run, and writes one multi-document
// manifest to stdout. Only what must change changes:
//
//   - images: the hand-built localhost/wsched:local (and a busybox stand-in for
//     the SenseVoice service, which prints its environment), IfNotPresent;
//   - the inventory: the simulated 8×RTX 4090 of testdata/sim-8x4090.toml
//     instead of NVML, and a 2 s [kubernetes] interval;
//   - the daemon's state hostPath (kept clear of the host's /var/lib/wsched);
//   - the DRA driver's pod (dra/driver.yaml) on the host's network, told the
//     API server's address: the e2e's API server listens on 127.0.0.1:6443
//     and the node has no kube-proxy to route the kubernetes Service there.
//
// Usage: patch MANIFEST_DIR SIM_TOML STATE_DIR [FILE...]
// (FILE: manifests relative to MANIFEST_DIR; default the node agent's and
// the SenseVoice example's).
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// defaultFiles are the manifests applied, in order, when none are named.
var defaultFiles = []string{"rbac.yaml", "configmap.yaml", "daemonset.yaml", "sensevoice.yaml"}

// The e2e's API server, as the DRA driver in its pod reaches it.
const (
	apiServerHost = "127.0.0.1"
	apiServerPort = "6443"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: patch MANIFEST_DIR SIM_TOML STATE_DIR [FILE...]")
		os.Exit(2)
	}
	files := os.Args[4:]
	if len(files) == 0 {
		files = defaultFiles
	}
	out, err := patchAll(os.Args[1], os.Args[2], os.Args[3], files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "patch:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}

func patchAll(dir, simPath, state string, files []string) ([]byte, error) {
	sim, err := os.ReadFile(simPath)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	i := bytes.Index(sim, []byte("[inventory]"))
	if i < 0 {
		return nil, fmt.Errorf("%s: no [inventory] section", simPath)
	}
	inventory := string(sim[i:])
	var out bytes.Buffer
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, fmt.Errorf("read manifest: %w", err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if obj == nil {
				continue
			}
			if err := patch(obj, inventory, state); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			y, err := yaml.Marshal(obj)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out.WriteString("---\n")
			out.Write(y)
		}
	}
	return out.Bytes(), nil
}

func patch(obj map[string]any, inventory, state string) error {
	switch obj["kind"] {
	case "ConfigMap":
		return patchConfig(obj, inventory)
	case "DaemonSet", "Deployment":
		return patchPodSpec(obj, state)
	}
	return nil
}

const nvml = "[inventory]\nprovider = \"nvml\"\n"

func patchConfig(obj map[string]any, inventory string) error {
	data, _ := obj["data"].(map[string]any)
	t, ok := data["wsched.toml"].(string)
	if !ok {
		return nil
	}
	if !strings.Contains(t, nvml) {
		return errors.New("wsched.toml: no nvml [inventory] section to replace")
	}
	t = strings.Replace(t, nvml, inventory+"\n", 1)
	data["wsched.toml"] = strings.Replace(t, `interval = "5s"`, `interval = "2s"`, 1)
	return nil
}

func patchPodSpec(obj map[string]any, state string) error {
	spec, ok := path(obj, "spec", "template", "spec")
	if !ok {
		return errors.New("no pod template")
	}
	containers, _ := spec["containers"].([]any)
	for _, c := range containers {
		c, _ := c.(map[string]any)
		if img, _ := c["image"].(string); strings.HasPrefix(img, "ghcr.io/wsched/wsched") {
			c["image"] = "localhost/wsched:local"
		} else { // the SenseVoice service: a stand-in that prints its env
			c["image"] = "localhost/busybox:local"
			c["command"] = []any{"sh", "-c", "env | sort; exec sleep 3600"}
			delete(c, "readinessProbe")
			delete(c, "livenessProbe")
			spec["terminationGracePeriodSeconds"] = 1 // sleep as PID 1 ignores SIGTERM
		}
		c["imagePullPolicy"] = "IfNotPresent"
		if c["name"] == "dra-driver" {
			spec["hostNetwork"] = true
			env, _ := c["env"].([]any)
			c["env"] = append(env,
				map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": apiServerHost},
				map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": apiServerPort})
		}
	}
	volumes, _ := spec["volumes"].([]any)
	for _, v := range volumes {
		if hp, ok := path(v, "hostPath"); ok && hp["path"] == "/var/lib/wsched" {
			hp["path"] = state
		}
	}
	return nil
}

// path walks nested maps.
func path(v any, keys ...string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	for _, k := range keys {
		if !ok {
			return nil, false
		}
		m, ok = m[k].(map[string]any)
	}
	return m, ok
}
