package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/testshared"
)

// repoRoot is where `make run` runs (two levels up from this package).
const repoRoot = "../.."

// TestMakeRunCommand: `make run` without CONFIG serves testdata/dev.toml (or
// its NVML copy) with the weightless models of ../shared when they are
// there; `make run CONFIG=FILE` serves FILE as it is.
func TestMakeRunCommand(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not found")
	}
	last := func(args ...string) string {
		cmd := exec.Command("make", append([]string{"-s", "-n", "-C", repoRoot, "--no-print-directory", "run"}, args...)...)
		// Not the flags of a make that runs this test (make test): its jobserver is not ours.
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
		})
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("make -n run %s: %v", strings.Join(args, " "), err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1]
	}
	want := "bin/wsched serve --config testdata/dev.toml"
	if exec.Command("sh", "-c", `ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1 '`).Run() == nil {
		want = "bin/wsched serve --config bin/dev-nvml.toml"
	}
	if models, err := filepath.Abs(filepath.Join(repoRoot, "../shared/models/whisper-empty")); err == nil {
		if _, err := os.Stat(models); err == nil {
			want = "WSCHED_MODELS_DIR=" + models + " " + want
		}
	}
	if got := last(); got != want {
		t.Errorf("make run serves\n %q\nwant\n %q", got, want)
	}
	if got := last("CONFIG=testdata/sim-8x4090.toml"); got != "bin/wsched serve --config testdata/sim-8x4090.toml" {
		t.Errorf("make run CONFIG=testdata/sim-8x4090.toml serves %q", got)
	}
}

// TestDevConfigServes: the daemon `make run` starts (testdata/dev.toml, in
// the repository root, the weightless models as WSCHED_MODELS_DIR) has
// simulated GPUs and the test models; where bin/ has the whisper.cpp
// backend (make plugins), the README's next command transcribes jfk.wav.
func TestDevConfigServes(t *testing.T) {
	modelsDir := testshared.File(t, "models/whisper-empty")
	jfk := testshared.File(t, "audio/jfk.wav")
	e := newE2E(t)
	root, _ := filepath.Abs(repoRoot)
	daemon := e.wsched("serve")
	daemon.Dir = root
	daemon.Env = append(daemon.Env, "WSCHED_CONFIG=testdata/dev.toml", "WSCHED_SOCKET="+e.socket,
		"WSCHED_STATE_DIR="+filepath.Join(e.dir, "state"), "WSCHED_MODELS_DIR="+modelsDir)
	var logs testshared.SyncBuffer
	daemon.Stderr = &logs
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = daemon.Process.Kill()
		_ = daemon.Wait()
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	e.waitHealthy()
	c := e.client()
	defer c.Close()
	g, err := c.GPUs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if g.Provider != "sim" || len(g.GPUs) != 2 {
		t.Errorf("dev daemon: provider %s, %d GPUs; want 2 simulated", g.Provider, len(g.GPUs))
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "wsched-backend-whisper")); err != nil {
		// The models of a backend that is not installed are not served:
		// the ggml files are whisper.cpp's by its descriptor's layout.
		t.Logf("no bin/wsched-backend-whisper (make plugins builds it): its models and the transcription are not tried")
		return
	}
	if body := getUnix(t, e.socket, "/v1/models"); !strings.Contains(body, `"id":"tiny"`) {
		t.Errorf("dev daemon's models lack the weightless tiny:\n%s", body)
	}
	cmd := e.wsched("transcribe", jfk)
	cmd.Env = append(cmd.Env, "WSCHED_SOCKET="+e.socket)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(stderr.String(), "completed") {
			t.Errorf("wsched transcribe jfk.wav against the dev daemon: %v\n%s", err, stderr.String())
		}
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("transcribe did not finish within 3 minutes:\n%s", stderr.String())
	}
}

// getUnix GETs path from the daemon's socket and returns the body.
func getUnix(t *testing.T, socket, path string) string {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://wsched" + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
