package execbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/plugins"
)

// testApp is the SenseVoice-shaped Python app in testdata.
func testApp(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found")
	}
	dir, err := filepath.Abs("testdata/app")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// appLoad is a LoadRequest for the test app with protocol and the app's
// knobs (APP_*), its state in a temp dir.
func appLoad(t testing.TB, protocol string, knobs map[string]string) (plugins.LoadRequest, string) {
	t.Helper()
	state := t.TempDir()
	env := map[string]string{"APP_STATE_DIR": state, "PYTHONDONTWRITEBYTECODE": "1"}
	for k, v := range knobs {
		env[k] = v
	}
	s := Settings{Name: "sensevoice", Command: []string{"python3", "main.py"}, Env: env, Protocol: protocol, StartTimeout: 30 * time.Second}
	return plugins.LoadRequest{ModelPath: testApp(t), Device: "cuda:0", Extra: s.Extra()}, state
}

func newBackend(t *testing.T) *Backend {
	t.Helper()
	b := New(Options{Log: slog.New(slog.NewTextHandler(testshared.LogWriter(t), nil)), StopGrace: 2 * time.Second,
		Environ: func() []string { return append(os.Environ(), "CUDA_VISIBLE_DEVICES=GPU-test") }})
	t.Cleanup(b.Close)
	return b
}

func readPID(t *testing.T, state, name string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, name))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// gone reports whether pid has exited (a zombie counts as exited).
func gone(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; !gone(pid); i++ {
		if i > 1000 {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func jfk(t testing.TB) string { return testshared.File(t, "audio/jfk.wav") }

func noEvents(plugins.Event) error { return nil }

// TestOpenAIProtocol: the app runs with the lease's environment plus
// SENSEVOICE_DEVICE and a loopback port, answers through the OpenAI route,
// its processes (app and worker) are reported, and Unload stops the group.
func TestOpenAIProtocol(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	req, state := appLoad(t, ProtocolOpenAI, map[string]string{"APP_WORKER": "1"})
	if _, err := b.Load(ctx, req); err != nil {
		t.Fatal(err)
	}
	app, worker := readPID(t, state, "pid"), readPID(t, state, "worker")
	info, err := b.Info(ctx)
	if err != nil || !slices.Contains(info.PIDs, app) || !slices.Contains(info.PIDs, worker) {
		t.Errorf("Info PIDs %v (app %d, worker %d): %v", info.PIDs, app, worker, err)
	}
	if info.Metadata["device"] != "cuda:0" || !strings.HasPrefix(info.Metadata["url"], "http://127.0.0.1:") {
		t.Errorf("metadata %v", info.Metadata)
	}
	res, err := b.Transcribe(ctx, plugins.TranscribeRequest{AudioPath: jfk(t), Language: "en"}, noEvents)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(jfk(t))
	want := fmt.Sprintf("device=cuda:0 visible=GPU-test pid=%d bytes=%d model=sensevoice", app, st.Size())
	if res.Text != want || len(res.Segments) != 2 || res.Segments[1].End != 11*time.Second || res.Language != "en" {
		t.Errorf("result %+v, want text %q and 2 segments", res, want)
	}
	if err := b.Health(ctx); err != nil {
		t.Errorf("health: %v", err)
	}
	if err := b.Unload(ctx); err != nil {
		t.Fatal(err)
	}
	waitGone(t, app)
	waitGone(t, worker)
	if _, err := b.Transcribe(ctx, plugins.TranscribeRequest{AudioPath: jfk(t)}, noEvents); !errors.Is(err, plugins.ErrNotLoaded) {
		t.Errorf("after unload: %v", err)
	}
}

// TestMultipartProtocol: SenseVoice api.py's shape, text at result.0.text,
// one segment as long as the WAV file.
func TestMultipartProtocol(t *testing.T) {
	b := newBackend(t)
	req, state := appLoad(t, ProtocolMultipart, nil)
	if _, err := b.Load(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	res, err := b.Transcribe(context.Background(), plugins.TranscribeRequest{AudioPath: jfk(t)}, noEvents)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, "device=cuda:0 pid="+strconv.Itoa(readPID(t, state, "pid"))) || !strings.HasSuffix(res.Text, "lang=auto") ||
		len(res.Segments) != 1 || res.Duration != 11*time.Second || res.Segments[0].End != res.Duration {
		t.Errorf("result %+v", res)
	}
	_, err = b.Transcribe(context.Background(), plugins.TranscribeRequest{AudioPath: jfk(t), VAD: true}, noEvents)
	if !errors.Is(err, plugins.ErrBadRequest) || !strings.Contains(err.Error(), `app "sensevoice"`) || !strings.Contains(err.Error(), "voice activity detection") {
		t.Errorf("VAD: %v", err)
	}
}

// TestAppFailsToStart: an app that never answers its health route, or exits
// at once, fails the load naming the app and showing what it printed.
func TestAppFailsToStart(t *testing.T) {
	for _, tt := range []struct {
		name, timeout string
		knobs         map[string]string
		want          []string
	}{
		{"never healthy", "15s", map[string]string{"APP_HEALTH": "never"}, []string{"did not become healthy", "/health did not answer 2xx within 15s", "SenseVoice-shaped test app"}},
		{"exits", "1m", map[string]string{"APP_EXIT": "3"}, []string{"exited (exit status 3)", "fatal: cannot load the model"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackend(t)
			req, state := appLoad(t, ProtocolOpenAI, tt.knobs)
			req.Extra[ExtraStartTimeout] = tt.timeout
			_, err := b.Load(context.Background(), req)
			if !errors.Is(err, plugins.ErrBadModel) || !strings.Contains(err.Error(), `app "sensevoice" (python3 main.py in `) {
				t.Fatalf("load: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if _, err := os.Stat(filepath.Join(state, "pid")); err == nil {
				waitGone(t, readPID(t, state, "pid"))
			}
		})
	}
}

// TestAppKilledMidCall: kill -9 of the app during a call fails it as
// unavailable (the host restarts the backend), naming the app.
func TestAppKilledMidCall(t *testing.T) {
	b := newBackend(t)
	req, state := appLoad(t, ProtocolOpenAI, nil)
	if _, err := b.Load(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "block"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Transcribe(context.Background(), plugins.TranscribeRequest{AudioPath: jfk(t)}, noEvents)
		done <- err
	}()
	for i := 0; ; i++ { // the app took the request
		if _, err := os.Stat(filepath.Join(state, "request")); err == nil {
			break
		}
		if i > 1000 {
			t.Fatal("the app never got the request")
		}
		time.Sleep(10 * time.Millisecond)
	}
	app := readPID(t, state, "pid")
	_ = syscall.Kill(app, syscall.SIGKILL)
	err := <-done
	if !errors.Is(err, plugins.ErrUnavailable) || !strings.Contains(err.Error(), "exited (signal: killed)") {
		t.Errorf("transcribe: %v", err)
	}
	if err := b.Health(context.Background()); !errors.Is(err, plugins.ErrUnavailable) {
		t.Errorf("health after the kill: %v", err)
	}
}

func TestParseSettings(t *testing.T) {
	good := Settings{Name: "x", Command: []string{"app"}, Protocol: ProtocolMultipart}.Extra()
	s, err := ParseSettings(plugins.LoadRequest{ModelPath: "/srv/app", Extra: good})
	if err != nil || s.Path != DefaultMultipartPath || s.Field != DefaultField || s.TextJSONPath != DefaultTextJSONPath ||
		s.Health != DefaultHealth || s.StartTimeout != DefaultStartTimeout || s.Dir != "/srv/app" {
		t.Errorf("defaults: %+v %v", s, err)
	}
	for name, extra := range map[string]map[string]string{
		"no command":   {ExtraCommand: "[]"},
		"bad protocol": {ExtraCommand: `["a"]`, ExtraProtocol: "grpc"},
		"bad route":    {ExtraCommand: `["a"]`, ExtraHealth: "health"},
		"bad path":     {ExtraCommand: `["a"]`, ExtraProtocol: ProtocolMultipart, ExtraTextJSONPath: "a..b"},
		"bad timeout":  {ExtraCommand: `["a"]`, ExtraStartTimeout: "soon"},
	} {
		if _, err := ParseSettings(plugins.LoadRequest{Extra: extra}); !errors.Is(err, plugins.ErrBadRequest) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPlainHTTPServerApp: an app on Python's http.server that reads
// Content-Length bytes and parses the form with the email parser (no
// chunked decoding, 411 without a length) gets the audio and the fields
// intact.
func TestPlainHTTPServerApp(t *testing.T) {
	testApp(t) // python3
	dir, err := filepath.Abs("testdata/stdlibapp")
	if err != nil {
		t.Fatal(err)
	}
	b := newBackend(t)
	s := Settings{Name: "plain", Command: []string{"python3", "main.py"}, Env: map[string]string{"PYTHONDONTWRITEBYTECODE": "1"},
		Protocol: ProtocolMultipart, StartTimeout: 30 * time.Second}
	if _, err := b.Load(context.Background(), plugins.LoadRequest{ModelPath: dir, Device: "cuda:0", Extra: s.Extra()}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Transcribe(context.Background(), plugins.TranscribeRequest{AudioPath: jfk(t), Language: "en"}, noEvents)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(jfk(t))
	if want := fmt.Sprintf("got %d bytes lang=en", st.Size()); res.Text != want {
		t.Errorf("the app received %q, want %q", res.Text, want)
	}
}
