package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/plugins/execbackend"
	"github.com/wsched/wsched/plugins/plugintest"
)

// execPlugins holds wsched-backend-exec and the fake backend, built once
// per test binary into a plugin directory of their own.
var execPlugins pluginBuild

func execBackendDir(t *testing.T) string {
	return execPlugins.dir(t, "wsched-exec-plugins-",
		[2]string{plugintest.FakeBinaryName, plugintest.FakePackage},
		[2]string{"wsched-backend-exec", "github.com/wsched/wsched/cmd/wsched-backend-exec"})
}

// execDaemon serves one 24 GiB simulated GPU with model "sensevoice" (the
// SenseVoice-shaped Python app in plugins/execbackend/testdata, 16 GiB) and
// "fake-tiny" (the fake backend, 12 GiB: the two do not fit together). The
// app's state (pid, request markers) is in the returned directory.
func execDaemon(t *testing.T, knobs map[string]string, mod func(*config.Config)) (*testDaemon, string) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found")
	}
	plugins := execBackendDir(t)
	app, err := filepath.Abs("../plugins/execbackend/testdata/app")
	if err != nil {
		t.Fatal(err)
	}
	dir, state := t.TempDir(), t.TempDir()
	model := filepath.Join(dir, "fake-tiny.bin")
	_ = os.WriteFile(model, []byte("model"), 0o644)
	env := map[string]string{"APP_STATE_DIR": state, "PYTHONDONTWRITEBYTECODE": "1"}
	for k, v := range knobs {
		env[k] = v
	}
	td := startDaemon(t, 1, 24*GiB, func(c *config.Config) {
		c.Backends.PluginDir, c.Backends.DevDirs = plugins, nil
		c.Models.Dir = filepath.Join(dir, "models")
		c.Models.Entries = []config.Model{
			{Name: "sensevoice", Backend: execbackend.Name, Command: []string{"python3", "main.py"}, Dir: app, Env: env,
				Memory: units.Bytes(16 * GiB), Health: "/health", Protocol: "openai", StartTimeout: units.Duration(time.Minute)},
			{Name: "fake-tiny", Backend: "fake", Path: model, Memory: units.Bytes(12 * GiB)},
		}
		c.Models.Default = "sensevoice"
		if mod != nil {
			mod(c)
		}
	})
	return td, state
}

func appPID(t *testing.T, state string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// exited reports whether pid is gone (or a zombie).
func exited(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// leasesBy waits until the leases are exactly those of the named backends
// (none: no leases) and returns them.
func (td *testDaemon) leasesBy(t *testing.T, backends ...string) []api.Lease {
	t.Helper()
	for i := 0; ; i++ {
		ls, err := td.c.Leases(context.Background())
		var got []string
		for _, l := range ls {
			got = append(got, l.Labels["wsched.backend"])
		}
		if err == nil && slices.Equal(got, backends) {
			return ls
		}
		if i > 2000 {
			t.Fatalf("leases %+v (%v), want those of %v", ls, err, backends)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestExecBackendJob runs jobs on the app through the exec backend: the app
// sees the lease's GPU (CUDA_VISIBLE_DEVICES) as cuda:0, its PID is counted
// against the lease, the second job reuses the warm app (keep-alive), and
// the OpenAI endpoint goes the same way.
func TestExecBackendJob(t *testing.T) {
	td, state := execDaemon(t, nil, nil)
	audio := testshared.File(t, "audio/jfk.wav")
	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q, "model": "sensevoice", "language": "en"}`, audio))
	got := td.waitJob(t, j.ID, finished)
	if got.State != jobs.Completed || got.Result == nil {
		t.Fatalf("job: %s %s", got.State, got.Error)
	}
	pid := appPID(t, state)
	st, _ := os.Stat(audio)
	want := fmt.Sprintf("device=cuda:0 visible=%s pid=%d bytes=%d model=sensevoice", got.GPUUUID, pid, st.Size())
	if got.Result.Text != want || len(got.Result.Segments) != 2 || got.Backend != "exec" || got.MemoryBytes != 16*GiB {
		t.Errorf("result %+v on %s (%d bytes), want text %q", got.Result, got.Backend, got.MemoryBytes, want)
	}
	ls := td.leasesBy(t, "exec") // warm for its keep-alive
	if !slices.Contains(ls[0].PIDs, pid) {
		t.Errorf("lease PIDs %v lack the app's %d", ls[0].PIDs, pid)
	}
	j2 := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	if got := td.waitJob(t, j2.ID, finished); got.State != jobs.Completed || !strings.Contains(got.Result.Text, fmt.Sprintf("pid=%d ", pid)) {
		t.Errorf("second job: %s %q %s, want the same app (pid %d)", got.State, got.Error, got.Result.Text, pid)
	}
	status, ctype, body := postMultipart(t, td, "/v1/audio/transcriptions", audio, map[string]string{"model": "sensevoice", "response_format": "text"})
	if status != 200 || !strings.HasPrefix(ctype, "text/plain") || !strings.Contains(body, fmt.Sprintf("device=cuda:0 visible=%s pid=%d", got.GPUUUID, pid)) {
		t.Errorf("OpenAI endpoint: %d %s %q", status, ctype, body)
	}
	status, _, body = postMultipart(t, td, "/v1/audio/transcriptions", audio, map[string]string{"model": "sensevoice", "vad": "true"})
	if status != 400 || !strings.Contains(body, "voice activity detection is not available: the backend gets the audio as it is") {
		t.Errorf("OpenAI endpoint with vad=true: %d %s", status, body)
	}
	td.stop()
	if !exited(pid) {
		t.Errorf("app %d outlived the daemon's stop", pid)
	}
}

// TestExecBackendEvicted: the app idles under its keep-alive; a load that
// does not fit next to it takes its memory back (the app's process group is
// stopped) and runs.
func TestExecBackendEvicted(t *testing.T) {
	td, state := execDaemon(t, map[string]string{"APP_WORKER": "1"}, nil)
	audio := testshared.File(t, "audio/jfk.wav")
	if got := td.waitJob(t, td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio)).ID, finished); got.State != jobs.Completed {
		t.Fatalf("sensevoice job: %s %s", got.State, got.Error)
	}
	pid := appPID(t, state)
	worker, _ := strconv.Atoi(readFile(t, filepath.Join(state, "worker")))
	td.leasesBy(t, "exec")
	got := td.waitJob(t, td.submit(t, fmt.Sprintf(`{"audio_path": %q, "model": "fake-tiny"}`, audio)).ID, finished)
	if got.State != jobs.Completed {
		t.Fatalf("fake-tiny job: %s %s", got.State, got.Error)
	}
	td.leasesBy(t, "fake")
	for _, p := range []int{pid, worker} {
		if !exited(p) {
			t.Errorf("process %d of the evicted app still runs", p)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// TestExecAppKilledMidJob: kill -9 of the app while it transcribes; the
// host restarts the backend and the app under the same lease, the job is
// retried and completes on the new app, and no lease is left.
func TestExecAppKilledMidJob(t *testing.T) {
	td, state := execDaemon(t, nil, func(c *config.Config) { c.Backends.KeepAlive = units.Duration(-1) })
	audio := testshared.File(t, "audio/jfk.wav")
	if err := os.WriteFile(filepath.Join(state, "block"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(state, "request")); err == nil {
			break
		}
		if i > 6000 {
			t.Fatalf("the app never got the request: %+v", td.job(t, j.ID))
		}
		time.Sleep(10 * time.Millisecond)
	}
	killed := appPID(t, state)
	_ = syscall.Kill(killed, syscall.SIGKILL)
	got := td.waitJob(t, j.ID, finished)
	if got.State != jobs.Completed || got.Attempts != 2 || strings.Contains(got.Result.Text, fmt.Sprintf("pid=%d ", killed)) {
		t.Errorf("after kill -9: %s, %d attempts, error %q, result %+v", got.State, got.Attempts, got.Error, got.Result)
	}
	td.leasesBy(t)
	if pid := appPID(t, state); !exited(pid) {
		t.Errorf("the restarted app %d outlived its instance", pid)
	}
}

// TestExecAppNeverHealthy: an app that never answers its health route fails
// the job at once, naming the app and showing its output; no lease is left.
func TestExecAppNeverHealthy(t *testing.T) {
	td, state := execDaemon(t, map[string]string{"APP_HEALTH": "never"}, func(c *config.Config) {
		c.Models.Entries[0].StartTimeout = units.Duration(10 * time.Second) // python3 may take seconds to start on a loaded machine
	})
	got := td.waitJob(t, td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, testshared.File(t, "audio/jfk.wav"))).ID, finished)
	for _, want := range []string{`app "sensevoice" (python3 main.py in `, "did not become healthy", "/health did not answer 2xx within 10s", "SenseVoice-shaped test app"} {
		if !strings.Contains(got.Error, want) {
			t.Errorf("error lacks %q: %s", want, got.Error)
		}
	}
	if got.State != jobs.Failed || got.Attempts != 1 || got.ErrorKind != "bad_input" {
		t.Errorf("job: %s, %d attempts, %s", got.State, got.Attempts, got.ErrorKind)
	}
	td.leasesBy(t)
	if pid := appPID(t, state); !exited(pid) {
		t.Errorf("the unhealthy app %d still runs", pid)
	}
}

// TestJobVADOptions: VAD settings from the model entry and from the job
// (JSON fields, OpenAI form fields) reach the backend through the plugin
// protocol; the fake backend says what VAD would have run with.
func TestJobVADOptions(t *testing.T) {
	td, audio := jobDaemon(t, 4*GiB, func(c *config.Config) {
		e := &c.Models.Entries[0]
		e.VADModel, e.VADThreshold, e.VADMinSilence = "/srv/models/ggml-silero-v5.1.2.bin", 0.3, units.Duration(200*time.Millisecond)
	})
	for _, tt := range []struct{ body, want string }{
		{`"vad": true, "vad_min_speech_ms": 120`, "vad model=ggml-silero-v5.1.2.bin threshold=0.3 min_speech=120ms min_silence=200ms max_speech=0s pad=0s"},
		{`"vad": true, "vad_threshold": 0.6, "vad_max_speech_s": 15, "vad_speech_pad_ms": 40, "vad_model": "other-vad.bin"}`,
			"vad model=other-vad.bin threshold=0.6 min_speech=0s min_silence=200ms max_speech=15s pad=40ms"},
		{`"vad": false`, ""},
		{`"vad_threshold": 0.9`, ""}, // the entry leaves VAD off
	} {
		j := td.submit(t, fmt.Sprintf(`{"audio_path": %q, %s}`, audio, tt.body))
		got := td.waitJob(t, j.ID, finished)
		if got.State != jobs.Completed {
			t.Fatalf("%s: %s %s", tt.body, got.State, got.Error)
		}
		if text := got.Result.Text; (tt.want == "" && strings.Contains(text, "vad")) || !strings.Contains(text, tt.want) {
			t.Errorf("%s: text %q, want %q", tt.body, text, tt.want)
		}
	}
	status, _, body := postMultipart(t, td, "/v1/audio/transcriptions", audio, map[string]string{"vad": "true", "vad_threshold": "0.7", "response_format": "text"})
	if status != 200 || !strings.Contains(body, "vad model=ggml-silero-v5.1.2.bin threshold=0.7 ") {
		t.Errorf("OpenAI endpoint: %d %s", status, body)
	}
	for _, bad := range []string{`"vad_threshold": 1.5`, `"vad_model": "../etc/passwd"`, `"vad_min_speech_ms": -1`} {
		if status, out := td.raw("POST", "/v1/jobs", fmt.Sprintf(`{"audio_path": %q, %s}`, audio, bad)); status != 400 || !strings.Contains(out, "field vad_") {
			t.Errorf("%s: %d %s", bad, status, out)
		}
	}
}
