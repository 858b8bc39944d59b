package main

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	manifestDir = "../.."
	simTOML     = "../../../../testdata/sim-8x4090.toml"
)

// daemonSets patches files and returns the DaemonSets' pod specs by name.
func daemonSets(t *testing.T, files ...string) map[string]map[string]any {
	t.Helper()
	out, err := patchAll(manifestDir, simTOML, "/e2e/state", files)
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]map[string]any{}
	for _, doc := range bytes.Split(out, []byte("---\n")) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("patched output: %v", err)
		}
		if obj["kind"] != "DaemonSet" {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		spec, ok := path(obj, "spec", "template", "spec")
		if !ok {
			t.Fatalf("DaemonSet %v: no pod spec", meta["name"])
		}
		specs[meta["name"].(string)] = spec
	}
	return specs
}

func containerEnv(c map[string]any) map[string]string {
	env := map[string]string{}
	list, _ := c["env"].([]any)
	for _, e := range list {
		e, _ := e.(map[string]any)
		v, _ := e["value"].(string)
		env[e["name"].(string)] = v
	}
	return env
}

// TestPatchDRADriver: the DRA driver's pod gets local images, the e2e's
// state path, the host network and the API server's address; the driver's
// other settings (NODE_NAME) stay.
func TestPatchDRADriver(t *testing.T) {
	specs := daemonSets(t, "dra/driver.yaml", "dra/deviceclass.yaml")
	spec, ok := specs["wsched-dra"]
	if !ok {
		t.Fatalf("no DaemonSet wsched-dra in the patched dra/driver.yaml (got %d DaemonSets)", len(specs))
	}
	if spec["hostNetwork"] != true {
		t.Errorf("hostNetwork = %v, want true", spec["hostNetwork"])
	}
	found := false
	for _, c := range spec["containers"].([]any) {
		c := c.(map[string]any)
		if c["image"] != "localhost/wsched:local" || c["imagePullPolicy"] != "IfNotPresent" {
			t.Errorf("container %v: image %v (%v), want localhost/wsched:local (IfNotPresent)", c["name"], c["image"], c["imagePullPolicy"])
		}
		env := containerEnv(c)
		if c["name"] != "dra-driver" {
			if _, ok := env["KUBERNETES_SERVICE_HOST"]; ok {
				t.Errorf("container %v got the API server's address", c["name"])
			}
			continue
		}
		found = true
		if env["KUBERNETES_SERVICE_HOST"] != apiServerHost || env["KUBERNETES_SERVICE_PORT"] != apiServerPort {
			t.Errorf("dra-driver env: %v, want KUBERNETES_SERVICE_HOST=%s KUBERNETES_SERVICE_PORT=%s", env, apiServerHost, apiServerPort)
		}
		if _, ok := env["NODE_NAME"]; !ok {
			t.Errorf("dra-driver env lost NODE_NAME: %v", env)
		}
	}
	if !found {
		t.Fatal("no dra-driver container")
	}
	states := 0
	for _, v := range spec["volumes"].([]any) {
		hp, ok := path(v, "hostPath")
		if !ok {
			continue
		}
		if hp["path"] == "/var/lib/wsched" {
			t.Error("the daemon's state still at the host's /var/lib/wsched")
		}
		if hp["path"] == "/e2e/state" {
			states++
		}
	}
	if states != 1 {
		t.Errorf("%d volumes at the e2e's state path, want 1", states)
	}
}

// TestPatchDefault: without files, the node agent's and SenseVoice's
// manifests; the device plugin's pod stays off the host network.
func TestPatchDefault(t *testing.T) {
	out, err := patchAll(manifestDir, simTOML, "/e2e/state", defaultFiles)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: Namespace", "kind: ConfigMap", "provider = \"sim\"", "kind: Deployment"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("patched default manifests lack %q", want)
		}
	}
	spec, ok := daemonSets(t, defaultFiles...)["wsched"]
	if !ok {
		t.Fatal("no DaemonSet wsched")
	}
	if _, ok := spec["hostNetwork"]; ok {
		t.Error("the device plugin's pod put on the host network")
	}
}
