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

	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
)

// TestSmoke is the backend's one exec test. It builds this command and
// runs it the way production does: a daemon with the sim provider starts it
// through the plugin host, under a lease and with the lease's environment,
// for jobs on the weightless tiny.en model and jfk.wav (see smoke_test.go).
// A second copy then runs under an address-space limit to show an
// allocation failure in whisper.cpp coming back as ErrOutOfMemory instead
// of a crash.
func TestSmoke(t *testing.T) {
	bin := build(t)
	t.Run("through the daemon", func(t *testing.T) { smokeDaemon(t, bin) })

	b, pid := start(t, exec.Command(bin), os.Environ())
	if _, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: sharedFile(t, "models/whisper-empty/for-tests-ggml-tiny.en.bin"), Device: "cpu", Threads: 2}); err != nil {
		t.Fatal(err)
	}
	peak := vmPeak(t, pid)
	t.Logf("backend pid %d: VmPeak %d MiB with tiny.en loaded", pid, peak>>20)

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
	return plugintest.Start(t, cmd, testshared.LogWriter(t), hclog.Warn)
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

func sharedFile(t testing.TB, name string) string { t.Helper(); return testshared.File(t, name) }
