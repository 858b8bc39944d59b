package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/estimator/onnx"
	"github.com/wsched/wsched/estimator/onnx/onnxtest"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/daemontest"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

// TestSmoke builds this command and runs it the way production does: a
// daemon with the sim provider starts it through the plugin host, under a
// lease and with the lease's environment, for jobs on generated
// SenseVoice-shaped models (a models_dir subdirectory each) and jfk.wav.
// It checks that a job passes through every state in order; that the
// backend, its ONNX Runtime having no CUDA provider, says so in its
// descriptor and is placed on the CPU (no GPU memory leased, no GPU
// visible) and loads there; that its memory report is under the
// estimator's sherpa-onnx figure for the CPU; that the OpenAI
// endpoint answers curl; and that the lease goes after keep-alive. It logs
// the cold (start + load + decode) and warm job latencies.
func TestSmoke(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	jfk := testshared.File(t, "audio/jfk.wav")
	models := filepath.Join(dir, "models")
	for name, vocab := range map[string]int{"sensevoice": 64, "sensevoice-wide": 20000} {
		_ = os.MkdirAll(filepath.Join(models, name), 0o755)
		if _, err := onnxtest.WriteSenseVoice(filepath.Join(models, name), onnxtest.SenseVoiceOptions{Vocab: vocab}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Defaults()
	cfg.Daemon.Socket, cfg.Daemon.StateDir = filepath.Join(dir, "wsched.sock"), filepath.Join(dir, "state")
	cfg.Inventory.Provider = inventory.ProviderSim
	cfg.Inventory.Sim = []inventory.SimGPU{{Name: "Sim GPU", Memory: units.Bytes(24 * units.GiB)}}
	cfg.Backends.PluginDir, cfg.Backends.DevDirs, cfg.Models.Dir = filepath.Dir(bin), nil, models
	cfg.Backends.KeepAlive = units.Duration(3 * time.Second)
	c := daemontest.Run(t, cfg)

	for _, name := range []string{"sensevoice", "sensevoice-wide"} {
		start := time.Now()
		j := daemontest.JobStates(t, c, api.JobRequest{AudioPath: jfk, Model: name}, "pending loading processing completed")
		cold := time.Since(start)
		if j.Result == nil || j.Attempts != 1 || len(j.Result.Segments) != 1 || j.Result.Text == "" || j.Result.Duration != 11*time.Second {
			t.Fatalf("%s job: %+v", name, j)
		}
		start = time.Now()
		daemontest.JobStates(t, c, api.JobRequest{AudioPath: jfk, Model: name}, "pending loading processing completed")
		warm := time.Since(start)
		inst := instance(t, c, name)
		// Its build cannot use CUDA (the descriptor's devices say cpu), so it
		// is placed on the CPU: no GPU lease, no GPU visible to it.
		if v, ok := inst.Metadata["env.CUDA_VISIBLE_DEVICES"]; !ok || v != "" || inst.GPUIndex != -1 || j.GPUUUID != "cpu" || inst.MemoryBytes != 0 {
			t.Errorf("the CPU-only backend saw CUDA_VISIBLE_DEVICES=%q (set: %v); its lease is on GPU %d with %d bytes (job on %q); want the CPU, no GPU memory",
				v, ok, inst.GPUIndex, inst.MemoryBytes, j.GPUUUID)
		}
		if inst.Metadata["kind"] != "sense_voice" || inst.Metadata["device"] != "cpu" || inst.Metadata["provider"] != "cpu" {
			t.Errorf("%s: metadata %v", name, inst.Metadata)
		}
		est := cpuEstimate(t, filepath.Join(models, name, "model.onnx"))
		t.Logf("%s: cold job %v, warm job %v; lease %s; backend reported %s resident growth at load, sherpa-onnx CPU estimate %s (weights %s), GPU estimate %s",
			name, cold.Round(time.Millisecond), warm.Round(time.Millisecond), units.FormatBytes(inst.MemoryBytes),
			units.FormatBytes(inst.ReportedBytes), units.FormatBytes(est.cpu.TotalBytes), units.FormatBytes(est.cpu.Breakdown.Weights), units.FormatBytes(est.gpu.TotalBytes))
		if inst.ReportedBytes <= 0 || inst.ReportedBytes > est.cpu.TotalBytes {
			t.Errorf("%s: reported %d bytes; the CPU estimate %d must cover it", name, inst.ReportedBytes, est.cpu.TotalBytes)
		}

	}

	// /v1/estimate reaches the sherpa-onnx profile for a registered model,
	// reading its ONNX files as the backend's descriptor lays them out.
	e, err := c.Estimate(context.Background(), api.EstimateRequest{Backend: string(estimator.SherpaOnnx), Model: "sensevoice"})
	if want := cpuEstimate(t, filepath.Join(models, "sensevoice", "model.onnx")).gpu; err != nil || e.Backend != "sherpa-onnx" || e.TotalBytes != want.TotalBytes {
		t.Errorf("POST /v1/estimate sherpa-onnx sensevoice: %+v %v; want the profile's %d bytes", e, err, want.TotalBytes)
	}
	var b api.Backends
	if b, err = c.Backends(context.Background()); err != nil || len(b.Backends) != 1 || b.Backends[0].Descriptor == nil || !b.Backends[0].Descriptor.CPUOnly() {
		t.Errorf("GET /v1/backends: %+v %v; want sherpa's descriptor, CPU only", b.Backends, err)
	}

	for _, tt := range []struct{ format, ctype, prefix string }{
		{"json", "application/json", `{"text":`},
		{"text", "text/plain; charset=utf-8", ""},
		{"verbose_json", "application/json", `{"task":"transcribe"`},
	} {
		ctype, body := daemontest.Curl(t, cfg.Daemon.Socket, jfk, "sensevoice", tt.format)
		if ctype != tt.ctype || !strings.HasPrefix(body, tt.prefix) || len(body) < 10 {
			t.Errorf("response_format=%s: %q %q", tt.format, ctype, body)
		}
		if strings.HasSuffix(tt.format, "json") {
			var v map[string]any
			if err := json.Unmarshal([]byte(body), &v); err != nil || v["text"] == "" {
				t.Errorf("%s: %v %v", tt.format, v, err)
			}
		}
	}

	for i := 0; ; i++ { // keep-alive ends: the instances go, their leases with them
		ls, _ := c.Leases(context.Background())
		if len(ls) == 0 {
			break
		}
		if i > 600 {
			t.Fatalf("backend leases not released after keep-alive: %+v", ls)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type estimates struct{ cpu, gpu estimator.Result }

// cpuEstimate is the sherpa-onnx profile for model on the CPU (where the
// backend ran) and on the sim GPU (what the lease was sized by).
func cpuEstimate(t *testing.T, model string) estimates {
	t.Helper()
	m, err := onnx.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	req := estimator.Request{Backend: estimator.SherpaOnnx, Model: filepath.Base(filepath.Dir(model)), ONNX: []*onnx.Model{m}, GPUModel: "Sim GPU"}
	var e estimates
	if e.cpu, err = estimator.New(estimator.Config{Device: "cpu"}, nil).Estimate(req); err != nil {
		t.Fatal(err)
	}
	if e.gpu, err = estimator.New(estimator.Config{}, nil).Estimate(req); err != nil {
		t.Fatal(err)
	}
	return e
}

// instance is the running backend instance serving model.
func instance(t *testing.T, c *client.Client, model string) api.BackendInstance {
	t.Helper()
	b, err := c.Backends(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range b.Instances {
		if strings.HasSuffix(inst.Metadata["model"], "/"+model) {
			return inst
		}
	}
	t.Fatalf("no instance serves %s: %+v", model, b.Instances)
	return api.BackendInstance{}
}
