package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs wsched in-process with the given environment and returns its
// stdout, stderr and error.
func runCLI(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	err := run(context.Background(), args, streams{in: strings.NewReader(""), out: &out, err: &errOut}, lookup)
	return out.String(), errOut.String(), err
}

const seedSim = "../../testdata/sim-8x4090.toml"

func TestGPUsJSONRoundTrip(t *testing.T) {
	out, _, err := runCLI(t, nil, "gpus", "--json", "--config", seedSim)
	if err != nil {
		t.Fatal(err)
	}
	var v gpusView
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("gpus --json output does not decode: %v\n%s", err, out)
	}
	if v.Provider != "sim" || len(v.GPUs) != 8 || v.Policy != "spread" {
		t.Fatalf("view: provider %s, %d GPUs, policy %s", v.Provider, len(v.GPUs), v.Policy)
	}
	g0 := v.GPUs[0]
	if len(g0.Processes) != 3 || g0.Accounting.ForeignBytes != g0.UsedBytes || g0.Accounting.AvailableBytes >= g0.FreeBytes {
		t.Errorf("GPU 0: %d processes, foreign %d of used %d, available %d", len(g0.Processes), g0.Accounting.ForeignBytes, g0.UsedBytes, g0.Accounting.AvailableBytes)
	}
	procs := int64(0)
	for _, p := range g0.Processes {
		procs += p.UsedBytes
	}
	if g0.DriverBytes <= 0 || g0.DriverBytes != g0.UsedBytes-procs {
		t.Errorf("GPU 0: driver %d, want used %d − processes %d", g0.DriverBytes, g0.UsedBytes, procs)
	}
	r := v.Recommendation
	if r.Device != "cuda:1" || r.Index == nil || *r.Index != 1 || r.Export != "export SENSEVOICE_DEVICE=cuda:1" || r.UUID != v.GPUs[1].UUID {
		t.Errorf("recommendation = %+v", r)
	}
}

func TestGPUsTable(t *testing.T) {
	out, _, err := runCLI(t, map[string]string{"NO_COLOR": "1"}, "gpus", "--config", seedSim)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"8 GPU(s), provider sim",
		"[full]    0  NVIDIA GeForce RTX 4090  23.69 GiB   21.23 GiB    2.46 GiB",
		"└ PID 1863729  python",
		"└ driver (no process)",
		"Recommended: GPU 1 (NVIDIA GeForce RTX 4090)",
		"  export SENSEVOICE_DEVICE=cuda:1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("color escapes written to a non-terminal")
	}
}

func TestGPUsPinnedByLegacyEnv(t *testing.T) {
	out, _, err := runCLI(t, map[string]string{"SENSEVOICE_DEVICE": "cuda:2"}, "gpus", "--json", "--config", seedSim)
	if err != nil {
		t.Fatal(err)
	}
	var v gpusView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if v.Recommendation.Device != "cuda:2" || v.Recommendation.Reason != "pinned by SENSEVOICE_DEVICE=cuda:2" {
		t.Errorf("pinned recommendation = %+v", v.Recommendation)
	}
}

func TestConfigCheck(t *testing.T) {
	out, _, err := runCLI(t, map[string]string{"WSCHED_SOCKET": "/tmp/x.sock"}, "config", "check", "--config", "../../wsched.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# config OK: ../../wsched.toml", `socket = "/tmp/x.sock"`, `policy = "spread"`, `max_age = "500ms"`} {
		if !strings.Contains(out, want) {
			t.Errorf("config check output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "deprecated") {
		t.Errorf("the default file uses deprecated keys:\n%s", out)
	}
	_, _, err = runCLI(t, map[string]string{"WSCHED_DEVICE": "cuda:x"}, "config", "check", "--config", "../../wsched.toml")
	if err == nil || err.Error() != `WSCHED_DEVICE: invalid device "cuda:x": cuda:N needs a GPU index N >= 0` {
		t.Errorf("bad device env: %v", err)
	}
}

// TestConfigCheckDeprecated: an old [backends] key is applied to its new
// key and config check names both.
func TestConfigCheckDeprecated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.toml")
	if err := os.WriteFile(path, []byte("[backends]\njob_timeout = \"2h\"\nmodels_url = \"https://mirror.example/m\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, nil, "config", "check", "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# deprecated: " + path + ":2: backends.job_timeout is deprecated, use jobs.timeout (the value was applied)",
		"# deprecated: " + path + ":3: backends.models_url is deprecated, use models.url (the value was applied)",
		"[jobs]", `timeout = "2h0m0s"`, `url = "https://mirror.example/m"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config check output lacks %q:\n%s", want, out)
		}
	}
}
