//go:build whisper

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/wsched/wsched/plugins"
)

// TestBackendBinary is the backend's one exec test: it builds this command,
// starts it the way the plugin host does (plugins.ClientConfig: handshake,
// AutoMTLS, the lease's environment as the whole environment) and runs a
// load and a transcription through it. A second copy runs under an address-
// space limit to show an allocation failure in whisper.cpp coming back as
// ErrOutOfMemory instead of a crash.
func TestBackendBinary(t *testing.T) {
	bin := build(t)
	tinyEN := sharedFile(t, "models/whisper-empty/for-tests-ggml-tiny.en.bin")
	env := append(os.Environ(), "CUDA_VISIBLE_DEVICES=GPU-00000000-1111-2222-3333-444444444444")
	b, pid := start(t, exec.Command(bin), env)

	info, err := b.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "whisper" || info.Metadata["env.CUDA_VISIBLE_DEVICES"] != "GPU-00000000-1111-2222-3333-444444444444" {
		t.Errorf("info %+v: want whisper, seeing the lease's CUDA_VISIBLE_DEVICES", info)
	}
	rep, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: tinyEN, Device: "cpu", Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.TotalBytes != 269_880_000 { // whisper.cpp 1.9.5's figures for tiny.en, flash attention off
		t.Errorf("memory report %+v: total %d, want 269,880,000", rep, rep.TotalBytes)
	}
	var last plugins.Event
	res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: sharedFile(t, "audio/jfk.wav")},
		func(ev plugins.Event) error { last = ev; return nil })
	if err != nil || res.Language != "en" || last.Kind != plugins.EventProgress || last.Percent != 100 {
		t.Errorf("transcribe: %+v, %v, last event %+v", res, err, last)
	}
	peak := vmPeak(t, pid)
	t.Logf("backend pid %d: VmPeak %d MiB after loading tiny.en and transcribing", pid, peak>>20)

	t.Run("allocation failure", func(t *testing.T) {
		large := sharedFile(t, "models/whisper-empty/for-tests-ggml-large.bin") // 3.09 GB weight buffer
		limitKiB := (peak + 1<<30) >> 10                                        // room for everything but large's weights
		wrapped := exec.Command("/bin/sh", "-c", fmt.Sprintf("ulimit -v %d && exec %s", limitKiB, bin))
		b, _ := start(t, wrapped, os.Environ())
		_, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: large, Device: "cpu"})
		if !errors.Is(err, plugins.ErrOutOfMemory) {
			t.Fatalf("load large under ulimit -v %d: %v, want ErrOutOfMemory", limitKiB, err)
		}
		t.Logf("load large under ulimit -v %d KiB: %v", limitKiB, err)
		if err := b.Health(t.Context()); !errors.Is(err, plugins.ErrUnavailable) {
			t.Errorf("health after the failure: %v, want ErrUnavailable", err)
		}
	})
}

// build compiles this command with the test's cgo environment.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "wsched-backend-whisper")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-tags", "whisper", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// start runs cmd as a plugin with env as its whole environment and returns
// the dispensed backend and its process id.
func start(t *testing.T, cmd *exec.Cmd, env []string) (plugins.Backend, int) {
	t.Helper()
	cmd.Env = env
	cfg := plugins.ClientConfig(cmd)
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "backend", Level: hclog.Warn, Output: testWriter{t}})
	client := plugin.NewClient(cfg)
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatal(err)
	}
	b, err := plugins.Dispense(rpc)
	if err != nil {
		t.Fatal(err)
	}
	return b, client.ReattachConfig().Pid
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// vmPeak reads a process's peak virtual memory size in bytes.
func vmPeak(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmPeak:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib << 10
		}
	}
	t.Fatal("no VmPeak in /proc/PID/status")
	return 0
}

// sharedFile finds NAME under the shared/ directory beside the repository,
// or skips the test.
func sharedFile(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "shared", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skipf("shared/%s not found above %s: skipping", name, dir)
		}
		dir = parent
	}
}
