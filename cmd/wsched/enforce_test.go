package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/enforce/preload"
)

// `wsched gpus` shows the tier the daemon would choose per GPU, and why: on
// the simulated box (driver "sim", no MPS) that is preload where the
// library is installed, else detect, with each stronger tier's reason.
func TestGPUsShowEnforcement(t *testing.T) {
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", t.TempDir()) // no MPS control daemon
	want := "detect"
	if _, ok := preload.Find(preload.Dirs()); ok {
		want = "preload"
	}
	out, _, err := runCLI(t, nil, "gpus", "--json", "--config", seedSim)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		GPUs []struct {
			Enforcement struct{ Tier, Reason string } `json:"enforcement"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	for i, g := range v.GPUs {
		if g.Enforcement.Tier != want || !strings.Contains(g.Enforcement.Reason, "not nvml-limits") {
			t.Errorf("GPU %d enforcement %+v", i, g.Enforcement)
		}
	}
	table, _, err := runCLI(t, map[string]string{"NO_COLOR": "1"}, "gpus", "--config", seedSim)
	if err != nil || !strings.Contains(table, "enforcement "+want+": ") {
		t.Errorf("table lacks the tier (%v):\n%s", err, table)
	}
}

func TestStatusShowsEnforcement(t *testing.T) {
	var out bytes.Buffer
	a := &app{streams: streams{out: &out}}
	gpus := api.GPUs{GPUs: []api.GPU{{GPUReading: api.GPUReading{Index: 0, Name: "Sim"}, Accounting: api.Account{Placeable: true},
		Enforcement: &api.Enforcement{Tier: "preload", Reason: "/usr/lib/wsched/libwsched_cuda_cap.so caps the CUDA driver's allocations"}}}}
	if err := renderStatus(a, api.Status{Started: time.Now()}, gpus); err != nil {
		t.Fatal(err)
	}
	if want := "enforcement preload: /usr/lib/wsched/libwsched_cuda_cap.so caps"; !strings.Contains(out.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, out.String())
	}
}

// With a daemon answering, `wsched gpus` shows the tier the daemon chose.
func TestGPUsShowDaemonEnforcement(t *testing.T) {
	e := newE2E(t)
	e.serve()
	cmd := e.wsched("gpus", "--json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Source string `json:"source"`
		GPUs   []struct {
			Enforcement struct{ Tier, Reason string } `json:"enforcement"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if v.Source != "daemon" || len(v.GPUs) != 1 || v.GPUs[0].Enforcement.Tier == "" || v.GPUs[0].Enforcement.Reason == "" {
		t.Errorf("gpus from the daemon: %s", out)
	}
}
