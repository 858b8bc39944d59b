package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/plugins/host"
	"github.com/wsched/wsched/plugins/plugintest"
)

func TestBackendsCheck(t *testing.T) {
	bin := plugintest.Build(t)
	out, _, err := runCLI(t, nil, "backends", "check", bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"path:       " + bin, "backend:    fake 0.0.0-test", "devices:    cpu, cuda", "handshake:  ok (go-plugin, gRPC, AutoMTLS)",
		"metadata:   mtls=true", "discovery:  accepted",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "env.CUDA_VISIBLE_DEVICES=GPU") {
		t.Errorf("check ran the backend with a GPU visible:\n%s", out)
	}

	if err := os.Chmod(bin, 0o777); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(t, nil, "backends", "check", "--json", bin)
	if err == nil || !strings.Contains(err.Error(), "the daemon would refuse "+bin+": world-writable (mode 0777)") {
		t.Errorf("check of a world-writable file: %v", err)
	}
	var res host.CheckResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Info.Name != "fake" || res.Refusal != "world-writable (mode 0777)" {
		t.Errorf("--json = %+v, %v\n%s", res, err, out)
	}

	notPlugin := filepath.Join(t.TempDir(), "wsched-backend-sh")
	if err := os.WriteFile(notPlugin, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, nil, "backends", "check", "--timeout", "5s", notPlugin); err == nil {
		t.Error("check of a non-plugin succeeded")
	}
}

func TestRenderBackends(t *testing.T) {
	b := api.Backends{
		Dirs:     []string{"/usr/lib/wsched/plugins", "/src/bin"},
		Backends: []api.Backend{{Name: "whisper", Path: "/usr/lib/wsched/plugins/wsched-backend-whisper", Version: "1.9.5", ModelFormats: []string{"ggml"}, Devices: []string{"cpu", "cuda"}}},
		Refused:  []api.RefusedBackend{{Path: "/src/bin/wsched-backend-x", Reason: "world-writable (mode 0777)"}},
		Instances: []api.BackendInstance{
			{ID: "i-1", Backend: "whisper", Model: "/m/ggml-tiny.bin", State: "idle", Lease: "l-1", GPUIndex: 2, PID: 4242,
				MemoryBytes: 1 << 30, ReportedBytes: 200 << 20, IdleSeconds: 12.4, KeepAliveSeconds: 300},
			{ID: "i-2", Backend: "whisper", Model: "/m/ggml-base.bin", State: "busy", Lease: "l-2", GPUIndex: -1, PID: 4343,
				KeepAliveSeconds: -1e-9, Restarts: 1, Failed: "backend given up", Streams: 3, MaxStreams: 8},
		},
	}
	var out strings.Builder
	if err := renderBackends(&out, b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Backend directories: /usr/lib/wsched/plugins, /src/bin",
		"whisper  1.9.5    ggml     cpu,cuda  /usr/lib/wsched/plugins/wsched-backend-whisper",
		"  /src/bin/wsched-backend-x: world-writable (mode 0777)",
		"i-1  whisper  /m/ggml-tiny.bin    2  l-1    4242  idle       0/1  1.00 GiB  200.00 MiB   12s        5m0s         0",
		"cpu  l-2    4343  busy",
		"busy       3/8       0 B         0 B     -        none         1",
		"  ! backend given up",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
