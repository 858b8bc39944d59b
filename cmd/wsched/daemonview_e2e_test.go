package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
)

// appendConfig adds TOML to the e2e config.
func (e *e2e) appendConfig(toml string) {
	e.t.Helper()
	f, err := os.OpenFile(e.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(toml); err != nil {
		e.t.Fatal(err)
	}
}

// withSecondGPU gives the simulated machine a second 24 GiB GPU.
func (e *e2e) withSecondGPU() {
	e.appendConfig("\n[[inventory.sim]]\nname = \"Sim 24GB\"\nmemory = \"24GiB\"\n")
}

// withExecEntry adds a [[models.model]] exec entry "sensevoice" with
// memory = "3GiB" (the seed's SenseVoice app, as the README configures it).
func (e *e2e) withExecEntry() {
	e.appendConfig(fmt.Sprintf(`
[[models.model]]
name = "sensevoice"
backend = "exec"
command = ["python3", "main.py"]
dir = %q
memory = "3GiB"
`, e.dir))
}

// output runs wsched ARGS with extra environment and returns its stdout,
// stderr and error.
func (e *e2e) output(env []string, args ...string) (string, string, error) {
	e.t.Helper()
	cmd := e.wsched(args...)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// leaseFor acquires a lease of bytes on dev for a fresh sleeper.
func (e *e2e) leaseFor(bytes int64, dev string) api.Lease {
	e.t.Helper()
	c := e.client()
	defer c.Close()
	holder := sleeper(e.t)
	l, err := c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: bytes, Device: dev, TTLSeconds: 3600, Holder: &api.HolderRequest{PID: holder.Process.Pid}})
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// TestGPUsShowsDaemonView (issue 23, item 1): with 13 GiB leased on GPU 1
// of two equal GPUs, `wsched gpus` shows the daemon's view — the lease, the
// memory held for a starving request, its provider — and recommends the GPU
// the daemon would place on (GPU 0), not the one a local reading picks.
// Without a daemon it says plainly that the view is local.
func TestGPUsShowsDaemonView(t *testing.T) {
	e := newE2E(t)
	e.withSecondGPU()
	e.appendConfig("\n[leases]\nbackfill_window = \"0s\"\n")
	out, _, err := e.output(nil, "gpus", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var local gpusView
	if err := json.Unmarshal([]byte(out), &local); err != nil {
		t.Fatal(err)
	}
	if local.Source != "local" || !strings.Contains(local.Note, "local view: no daemon answered on "+e.socket) {
		t.Errorf("without a daemon: source %q, note %q", local.Source, local.Note)
	}
	e.serve()
	e.leaseFor(13*GiB, "cuda:1")
	c := e.client()
	defer c.Close()
	go func() { // waits on GPU 1 (pinned, does not fit): memory is held for it
		holder := sleeper(t)
		_, _ = c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: 16 * GiB, Device: "cuda:1", WaitSeconds: 60, Holder: &api.HolderRequest{PID: holder.Process.Pid}})
	}()
	waitFor(t, 10*time.Second, "the request to wait with memory held", func() bool {
		g, err := c.GPUs(context.Background())
		return err == nil && len(g.Held) == 1
	})
	out, _, err = e.output(nil, "gpus", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var v gpusView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if v.Source != "daemon" || v.Provider != "sim" || len(v.GPUs) != 2 {
		t.Fatalf("view: source %q provider %q, %d GPUs", v.Source, v.Provider, len(v.GPUs))
	}
	g1 := v.GPUs[1]
	if g1.Leases != 1 || g1.Accounting.LeasedBytes != 13*GiB || g1.HeldBytes == 0 || g1.availableNow() != 0 {
		t.Errorf("GPU 1: %d leases, %d leased, %d held, %d available now", g1.Leases, g1.Accounting.LeasedBytes, g1.HeldBytes, g1.availableNow())
	}
	r := v.Recommendation
	if r.Index == nil || *r.Index != 0 || r.Export != "export SENSEVOICE_DEVICE=cuda:0" || !strings.Contains(r.Reason, "where the daemon would place") {
		t.Errorf("recommendation = %+v", r)
	}
	text, _, err := e.output([]string{"NO_COLOR=1"}, "gpus")
	if err != nil || !strings.Contains(text, "the daemon's view on "+e.socket) || !strings.Contains(text, "└ 1 lease(s), 13.00 GiB leased; 16.00 GiB held for waiting requests") {
		t.Errorf("gpus text (%v):\n%s", err, text)
	}
}

// TestEstimateUsesDaemonView (issue 23, item 1): `wsched estimate` counts
// the daemon's leases in availability, sufficiency and copies, and names
// the GPU the daemon would place the recommendation on.
func TestEstimateUsesDaemonView(t *testing.T) {
	e := newE2E(t)
	e.withSecondGPU()
	e.serve()
	e.leaseFor(13*GiB, "cuda:1")
	out, _, err := e.output(nil, "estimate", "--model", "medium", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		GPUs []struct {
			Index          int
			AvailableBytes int64 `json:"available_bytes"`
			Copies         int64
		}
		GPUSource   string                `json:"gpu_source"`
		Placement   *api.PlacementPreview `json:"placement"`
		Recommended int64                 `json:"recommended_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(v.GPUs) != 2 || v.GPUs[1].AvailableBytes != 11*GiB || v.GPUs[0].AvailableBytes != 24*GiB {
		t.Errorf("GPUs: %+v", v.GPUs)
	}
	if v.GPUs[1].Copies != 11*GiB/v.Recommended {
		t.Errorf("copies on GPU 1: %d, want %d", v.GPUs[1].Copies, 11*GiB/v.Recommended)
	}
	if !strings.Contains(v.GPUSource, "the daemon's view") || v.Placement == nil || v.Placement.GPUIndex != 0 || !v.Placement.Fits {
		t.Errorf("source %q, placement %+v", v.GPUSource, v.Placement)
	}
	text, _, err := e.output(nil, "estimate", "--model", "medium")
	if err != nil || !strings.Contains(text, "placement: the daemon would place") || !strings.Contains(text, "on GPU 0") {
		t.Errorf("estimate text (%v):\n%s", err, text)
	}
	text, _, err = e.output(nil, "estimate", "--model", "medium", "--no-daemon")
	if err != nil || !strings.Contains(text, "gpus: local view (--no-daemon)") {
		t.Errorf("estimate --no-daemon (%v):\n%s", err, text)
	}
}

// TestModelsListShowsDaemonModels (issue 23, items 1 and 3): `models list`
// shows the daemon's models — an exec entry with its memory, not "no
// estimate" — even when the CLI's own config has none.
func TestModelsListShowsDaemonModels(t *testing.T) {
	e := newE2E(t)
	e.withExecEntry()
	e.serve()
	bare := filepath.Join(e.dir, "client.toml") // the CLI's own config: the socket only
	if err := os.WriteFile(bare, []byte(fmt.Sprintf("[daemon]\nsocket = %q\n", e.socket)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := e.output(nil, "models", "list", "--json", "--config", bare)
	if err != nil {
		t.Fatal(err)
	}
	var v modelsView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if v.Source != "daemon" || len(v.Models) != 1 || v.Models[0].Name != "sensevoice" || v.Models[0].Estimate == nil ||
		v.Models[0].Estimate.RecommendedBytes != 3*GiB || v.Models[0].EstimateError != "" || len(v.GPUs) != 1 {
		t.Fatalf("models list: %s", out)
	}
	if fit := v.Models[0].Estimate.GPUs; len(fit) != 1 || !fit[0].Sufficient || fit[0].Copies != 8 {
		t.Errorf("fit: %+v", fit)
	}
	text, _, err := e.output(nil, "models", "list", "--no-daemon")
	if err != nil || strings.Contains(text, "no estimate") || !strings.Contains(text, "3.00 GiB") || !strings.Contains(text, "local view: --no-daemon") {
		t.Errorf("models list --no-daemon (%v):\n%s", err, text)
	}
}

// TestRunSizesDaemonModelEntry (issue 23, item 3): `run --model` and
// `lease --model` size a model entry the daemon knows — an exec entry by
// its memory — resolved by the daemon against its registry.
func TestRunSizesDaemonModelEntry(t *testing.T) {
	e := newE2E(t)
	e.withExecEntry()
	e.serve()
	_, stderr, err := e.output(nil, "run", "--model", "sensevoice", "--", "true")
	if err != nil || !strings.Contains(stderr, "granted: 3.00 GiB on GPU 0") {
		t.Errorf("run --model sensevoice: %v\n%s", err, stderr)
	}
	holder := sleeper(t)
	out, stderr, err := e.output(nil, "lease", "--model", "sensevoice", "--json", "--holder-pid", fmt.Sprint(holder.Process.Pid))
	var l api.Lease
	if err != nil || json.Unmarshal([]byte(out), &l) != nil || l.MemoryBytes != 3*GiB {
		t.Errorf("lease --model sensevoice: %v %+v\n%s", err, l, stderr)
	}
	_, stderr, err = e.output(nil, "lease", "--model", "nonesuch", "--holder-pid", fmt.Sprint(holder.Process.Pid))
	if err == nil || !strings.Contains(stderr, "the daemon serves: sensevoice") {
		t.Errorf("lease --model nonesuch: %v\n%s", err, stderr)
	}
}

// TestLeaseInsideLease (issue 23, item 2): in a shell that evaluated a
// lease on GPU 1, SENSEVOICE_DEVICE=cuda:0 names GPU 1: a new lease goes
// there, `wsched gpus` recommends it with the lease-relative export, and a
// pin the lease's CUDA_VISIBLE_DEVICES contradicts is an error naming why.
func TestLeaseInsideLease(t *testing.T) {
	e := newE2E(t)
	e.withSecondGPU()
	e.serve()
	e.leaseFor(23*GiB, "cuda:0") // GPU 0 is nearly full
	outer := e.leaseFor(4*GiB, "cuda:1")
	var env []string
	for k, v := range outer.Env {
		env = append(env, k+"="+v)
	}
	holder := sleeper(t)
	out, stderr, err := e.output(env, "lease", "--memory", "1GiB", "--json", "--holder-pid", fmt.Sprint(holder.Process.Pid))
	var l api.Lease
	if err != nil || json.Unmarshal([]byte(out), &l) != nil || l.GPUIndex != 1 {
		t.Fatalf("lease inside a lease: %v %+v\n%s", err, l, stderr)
	}
	out, _, err = e.output(env, "gpus", "--json")
	var v gpusView
	if err != nil || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatal(err)
	}
	if r := v.Recommendation; r.Index == nil || *r.Index != 1 || r.Export != "export SENSEVOICE_DEVICE=cuda:0" || !strings.Contains(r.Reason, "the GPU of lease "+outer.ID) {
		t.Errorf("recommendation inside the lease: %+v", r)
	}
	_, stderr, err = e.output(append(env, "WSCHED_DEVICE=cuda:1"), "lease", "--memory", "1GiB", "--holder-pid", fmt.Sprint(holder.Process.Pid))
	if err == nil || !strings.Contains(stderr, "WSCHED_DEVICE=cuda:1 inside lease "+outer.ID+": CUDA_VISIBLE_DEVICES="+outer.GPUUUID+" makes only cuda:0 visible") {
		t.Errorf("contradicting pin: %v\n%s", err, stderr)
	}
}
