package sherpa

import (
	"log/slog"
	"os"
	"testing"

	"github.com/wsched/wsched/estimator/onnx/onnxtest"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/testtmp"
	"github.com/wsched/wsched/plugins"
)

// TestMain runs the tests in a TMPDIR of their own and fails when they leave
// anything there.
func TestMain(m *testing.M) { os.Exit(testtmp.Main(m)) }

func jfk(t testing.TB) string { return testshared.File(t, "audio/jfk.wav") }

// senseVoiceDir writes a generated SenseVoice model directory.
func senseVoiceDir(t testing.TB, o onnxtest.SenseVoiceOptions) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := onnxtest.WriteSenseVoice(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// newBackend returns a Backend logging through the test, and the log.
func newBackend(t testing.TB) (*Backend, *testshared.SyncBuffer) {
	t.Helper()
	var logs testshared.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("backend log:\n%s", logs.String())
		}
	})
	return New(Options{Log: log, FFmpeg: FFmpegNone}), &logs
}

// loaded returns a Backend with a generated SenseVoice model loaded.
func loaded(t testing.TB, req plugins.LoadRequest) *Backend {
	t.Helper()
	b, _ := newBackend(t)
	if req.ModelPath == "" {
		req.ModelPath = senseVoiceDir(t, onnxtest.SenseVoiceOptions{})
	}
	if _, err := b.Load(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Unload(t.Context()) })
	return b
}
