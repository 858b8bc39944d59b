//go:build whisper

package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/estimator/ggml"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/daemontest"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

// smokeDaemon serves one simulated 24 GiB GPU with the real backend in its
// plugin directory and tiny.en in its models directory, then checks: a job
// passes through every state in order (SSE); the backend process saw its
// lease's GPU UUID as CUDA_VISIBLE_DEVICES (or, a build without a CUDA
// backend, was placed on the CPU with no GPU lease, as its descriptor says); it reported whisper.cpp's buffer
// sizes, within 5 % of the estimator's; every OpenAI response format answers
// curl with the right content type and shape; a corrupt WAV fails naming the
// cause; and the backend's lease is released after keep-alive.
func smokeDaemon(t *testing.T, bin string) {
	dir := t.TempDir()
	tiny := sharedFile(t, "models/whisper-empty/for-tests-ggml-tiny.en.bin")
	jfk := sharedFile(t, "audio/jfk.wav")
	models := filepath.Join(dir, "models")
	_ = os.MkdirAll(models, 0o755)
	data, err := os.ReadFile(tiny)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(models, "ggml-tiny.en.bin"), data, 0o644)
	cfg := config.Defaults()
	cfg.Daemon.Socket, cfg.Daemon.StateDir = filepath.Join(dir, "wsched.sock"), filepath.Join(dir, "state")
	cfg.Inventory.Provider = inventory.ProviderSim
	cfg.Inventory.Sim = []inventory.SimGPU{{Name: "Sim GPU", Memory: units.Bytes(24 * units.GiB)}}
	cfg.Backends.PluginDir, cfg.Backends.DevDirs, cfg.Models.Dir = filepath.Dir(bin), nil, models
	cfg.Backends.KeepAlive = units.Duration(3 * time.Second)
	c := daemontest.Run(t, cfg)

	j := daemontest.JobStates(t, c, api.JobRequest{AudioPath: jfk, Model: "tiny.en"}, "pending loading processing completed")
	if j.Result == nil || j.Result.Language != "en" || j.Attempts != 1 {
		t.Errorf("job: %+v", j)
	}
	inst := backendInstance(t, c)
	if cpuOnly(t, c) { // a whisper.cpp without a CUDA backend: placed on the CPU, no GPU lease, no GPU visible
		if v, ok := inst.Metadata["env.CUDA_VISIBLE_DEVICES"]; !ok || v != "" || inst.GPUIndex != -1 || j.GPUUUID != "cpu" || inst.MemoryBytes != 0 {
			t.Errorf("the CPU-only backend saw CUDA_VISIBLE_DEVICES=%q (set: %v); its lease is on GPU %d with %d bytes (job on %q); want the CPU",
				v, ok, inst.GPUIndex, inst.MemoryBytes, j.GPUUUID)
		}
	} else if inst.Metadata["env.CUDA_VISIBLE_DEVICES"] != inst.GPUUUID || inst.GPUUUID == "" || inst.GPUUUID != j.GPUUUID {
		t.Errorf("the backend saw CUDA_VISIBLE_DEVICES=%q; its lease is on %q (job on %q)", inst.Metadata["env.CUDA_VISIBLE_DEVICES"], inst.GPUUUID, j.GPUUUID)
	}
	if inst.Metadata["flash_attn"] != "true" {
		t.Errorf("the daemon loaded tiny.en with flash_attn=%q; it sizes leases for flash attention", inst.Metadata["flash_attn"])
	}
	compareWithEstimator(t, tiny, inst.Reported, inst.Metadata["flash_attn"] == "true")

	for _, tt := range []struct{ format, ctype, prefix string }{
		{"json", "application/json", `{"text":`},
		{"text", "text/plain; charset=utf-8", ""},
		{"srt", "text/plain; charset=utf-8", ""},
		{"vtt", "text/plain; charset=utf-8", "WEBVTT\n"},
		{"verbose_json", "application/json", `{"task":"transcribe","language":"english","duration":11`},
	} {
		ctype, body := daemontest.Curl(t, cfg.Daemon.Socket, jfk, "tiny.en", tt.format)
		if ctype != tt.ctype || !strings.HasPrefix(body, tt.prefix) {
			t.Errorf("response_format=%s: %q %q", tt.format, ctype, body)
		}
		if tt.format == "verbose_json" || tt.format == "json" {
			var v map[string]any
			if err := json.Unmarshal([]byte(body), &v); err != nil {
				t.Errorf("%s is not JSON: %v", tt.format, err)
			}
		}
	}

	corrupt := filepath.Join(dir, "corrupt.wav")
	_ = os.WriteFile(corrupt, append([]byte("RIFF\x24\x00\x00\x00WAVEfmt "), make([]byte, 7)...), 0o644)
	bad := daemontest.JobStates(t, c, api.JobRequest{AudioPath: corrupt, Model: "tiny.en"}, "pending loading processing failed")
	if bad.ErrorKind != "bad_input" || bad.Attempts != 1 || !strings.Contains(strings.ToLower(bad.Error), "wav") {
		t.Errorf("corrupt WAV: %s %q (%s, %d attempts)", bad.State, bad.Error, bad.ErrorKind, bad.Attempts)
	}

	for i := 0; ; i++ { // keep-alive ends: the instance goes, its lease with it
		ls, _ := c.Leases(context.Background())
		if len(ls) == 0 {
			break
		}
		if i > 600 {
			t.Fatalf("backend lease not released after keep-alive: %+v", ls)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func backendInstance(t *testing.T, c *client.Client) api.BackendInstance {
	t.Helper()
	b, err := c.Backends(context.Background())
	if err != nil || len(b.Instances) != 1 {
		t.Fatalf("backends: %+v %v", b, err)
	}
	return b.Instances[0]
}

// compareWithEstimator checks the backend's own report against the
// estimator's whisper.cpp profile for the same file and load (CPU, flash
// attention as loaded), buffer by buffer, within 5 %.
func compareWithEstimator(t *testing.T, model string, reported map[string]int64, flashAttn bool) {
	t.Helper()
	hdr, err := ggml.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	res, err := estimator.New(estimator.Config{Device: "cpu"}, nil).Estimate(estimator.Request{Backend: estimator.WhisperCpp, Header: hdr, FlashAttention: &flashAttn})
	if err != nil {
		t.Fatal(err)
	}
	var compute int64
	for k, v := range reported {
		if strings.HasPrefix(k, "compute_") {
			compute += v
		}
	}
	b := res.Breakdown
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"model", reported["model"], b.Weights}, {"kv_self", reported["kv_self"], b.KVSelf},
		{"kv_cross", reported["kv_cross"], b.KVCross}, {"kv_pad", reported["kv_pad"], b.KVPad}, {"compute", compute, b.Compute},
	} {
		off := math.Abs(float64(c.got-c.want)) / float64(c.want)
		t.Logf("%-8s reported %12d estimated %12d (%.3f%% off)", c.name, c.got, c.want, 100*off)
		if c.want == 0 || off > 0.05 {
			t.Errorf("%s: backend reported %d, estimator %d: more than 5%% apart", c.name, c.got, c.want)
		}
	}
}

// cpuOnly reports whether the backend's descriptor says this build cannot
// use CUDA.
func cpuOnly(t *testing.T, c *client.Client) bool {
	t.Helper()
	b, err := c.Backends(context.Background())
	if err != nil || len(b.Backends) != 1 || b.Backends[0].Descriptor == nil {
		t.Fatalf("backends: %+v %v; want the whisper backend with its descriptor", b.Backends, err)
	}
	return b.Backends[0].Descriptor.CPUOnly()
}
