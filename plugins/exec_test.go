package plugins_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"

	"github.com/wsched/wsched/internal/testshared"
)

// TestServeExec is the SDK's one test that execs a real plugin binary: it
// builds the fake backend and drives it through plugin.NewClient with
// AutoMTLS, as the daemon will.
func TestServeExec(t *testing.T) {
	bin := plugintest.Build(t)
	const leaseGPU = "GPU-7d5e1f3a-0000-4000-8000-000000000001"
	t.Setenv("CUDA_VISIBLE_DEVICES", "GPU-the-daemons-own") // must not leak into the backend

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"CUDA_VISIBLE_DEVICES="+leaseGPU,
		"CUDA_DEVICE_ORDER=PCI_BUS_ID",
		plugin.EnvUnixSocketDir+"="+t.TempDir(), // as plugins/host does: no socket left in $TMPDIR
		plugintest.EnvVar(plugintest.Memory, "model=1000,kv_self=200,kv_cross=30,compute.encode=4"),
	)
	var logs syncBuffer
	cfg := plugins.ClientConfig(cmd)
	if !cfg.AutoMTLS {
		t.Fatal("ClientConfig does not enable AutoMTLS")
	}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
	client := plugin.NewClient(cfg)
	defer client.Kill()
	rpc, err := client.Client()
	if err != nil {
		t.Fatal(err)
	}
	b, err := plugins.Dispense(rpc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	info, err := b.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"env.CUDA_VISIBLE_DEVICES": leaseGPU,
		"env.CUDA_DEVICE_ORDER":    "PCI_BUS_ID",
		"mtls":                     "true",
		"pid":                      fmt.Sprint(client.ReattachConfig().Pid),
	} {
		if got := info.Metadata[k]; got != want {
			t.Errorf("Info metadata %s = %q, want %q", k, got, want)
		}
	}

	rep, err := b.Load(ctx, plugins.LoadRequest{ModelPath: testshared.Touch(t, "model.bin"), Device: "cuda:0"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ModelBytes != 1000 || rep.KVSelfBytes != 200 || rep.ComputeBytes["encode"] != 4 || rep.TotalBytes != 1234 {
		t.Errorf("Load report = %+v, want model 1000, kv_self 200, encode 4, total 1234", rep)
	}

	audio := testshared.Touch(t, "a.wav")
	var events int
	res, err := b.Transcribe(ctx, plugins.TranscribeRequest{AudioPath: audio, Extra: map[string]string{plugintest.Segments: "5"}},
		func(plugins.Event) error { events++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Segments) != 5 || events != 11 { // 5 × (progress, segment) + progress 100
		t.Errorf("got %d segments in %d events, want 5 in 11", len(res.Segments), events)
	}

	// A backend killed mid-transcription reads as ErrUnavailable. Segments
	// it sent just before may be lost with it (SIGKILL beats the flush).
	var segs int
	_, err = b.Transcribe(ctx, plugins.TranscribeRequest{AudioPath: audio, Extra: map[string]string{
		plugintest.CrashAfter: "2", plugintest.CrashMode: "kill",
	}}, func(ev plugins.Event) error {
		if ev.Kind == plugins.EventSegment {
			segs++
		}
		return nil
	})
	if !errors.Is(err, plugins.ErrUnavailable) || segs > 2 {
		t.Errorf("crashing Transcribe: %d segments, error %v; want at most 2, ErrUnavailable", segs, err)
	}
	client.Kill() // waits for the log copier to finish
	if !client.Exited() {
		t.Error("backend still running after Kill")
	}
	if !strings.Contains(logs.String(), "[INFO]  wsched-backend-fake: loaded model: ") {
		t.Errorf("backend's Info log line did not reach the host logger at INFO:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer = testshared.SyncBuffer
