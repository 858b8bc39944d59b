//go:build whisper

package whisper

import (
	"context"
	"errors"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/estimator/ggml"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
	"github.com/wsched/wsched/plugins/whisper/internal/wlog"
)

// Everything in this file goes through the real gRPC shims
// (plugin.TestPluginGRPCConn) to a Backend running real whisper.cpp.

func TestInfo(t *testing.T) {
	b := plugintest.Connect(t, newBackend(t, Options{Version: "1.2.3", FFmpeg: FFmpegNone}))
	info, err := b.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "whisper" || info.Version != "1.2.3" || !slices.Equal(info.ModelFormats, []string{"ggml"}) {
		t.Errorf("info = %+v", info)
	}
	if !slices.Contains(info.Devices, "cpu") {
		t.Errorf("devices %v lack cpu", info.Devices)
	}
	if !strings.HasPrefix(info.Metadata["whisper_cpp"], "1.") || !strings.Contains(info.Metadata["devices"], "CPU") {
		t.Errorf("metadata %v: want whisper.cpp's version and a CPU device", info.Metadata)
	}
	if info.Metadata["ffmpeg"] != "" {
		t.Errorf("ffmpeg %q with FFmpeg: none", info.Metadata["ffmpeg"])
	}
	t.Logf("metadata: %v", info.Metadata)
}

// logged is what whisper.cpp 1.9.5 prints for for-tests-ggml-tiny.en.bin on
// the CPU (docs/notes/whisper-bindings.md), in bytes (1 MB = 10^6 bytes).
func logged(flashAttn bool) plugins.MemoryReport {
	encode := int64(64_810_000)
	if flashAttn {
		encode = 17_720_000
	}
	r := plugins.MemoryReport{
		ModelBytes: 77_110_000, KVSelfBytes: 3_150_000, KVCrossBytes: 9_440_000, KVPadBytes: 2_360_000,
		ComputeBytes: map[string]int64{"conv": 13_210_000, "encode": encode, "cross": 3_890_000, "decode": 95_910_000},
	}
	r.TotalBytes = r.Sum()
	return r
}

// TestLoadMemoryReport: Load returns exactly the sizes whisper.cpp logs for
// tiny.en (as recorded in the estimator's testdata), and they are within 5%
// of the estimator's whisper.cpp profile for the same file on the CPU.
func TestLoadMemoryReport(t *testing.T) {
	model := tinyEN(t)
	b := plugintest.Connect(t, newBackend(t, Options{}))
	for _, fa := range []bool{false, true} {
		got, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: model, Device: "cpu", FlashAttention: fa})
		if err != nil {
			t.Fatal(err)
		}
		want := logged(fa)
		if !reportsEqual(got, want) {
			t.Errorf("flash attention %v: report %+v, want %+v", fa, got, want)
		}
		if rec := recordedLog(t, fa); !reportsEqual(got, rec) {
			t.Errorf("flash attention %v: report %+v, but the recorded log says %+v", fa, got, rec)
		}
		compareEstimate(t, model, fa, got)
	}
}

func reportsEqual(a, b plugins.MemoryReport) bool {
	return a.ModelBytes == b.ModelBytes && a.KVSelfBytes == b.KVSelfBytes && a.KVCrossBytes == b.KVCrossBytes &&
		a.KVPadBytes == b.KVPadBytes && a.TotalBytes == b.TotalBytes && maps.Equal(a.ComputeBytes, b.ComputeBytes)
}

// recordedLog parses estimator/testdata/whispercpp-1.9.5/tiny.en-*.log, the
// probe's raw whisper.cpp output, with wlog alone.
func recordedLog(t *testing.T, fa bool) plugins.MemoryReport {
	t.Helper()
	name := "tiny.en-greedy-fa-off.log"
	if fa {
		name = "tiny.en-greedy-fa-on.log"
	}
	data, err := os.ReadFile(repoFile(t, "estimator/testdata/whispercpp-1.9.5/"+name))
	if err != nil {
		t.Fatal(err)
	}
	r := wlog.NewReport()
	for line := range strings.Lines(string(data)) {
		r.Add(line)
	}
	s := func(k string) int64 { return r.Sizes[k].Bytes }
	rep := plugins.MemoryReport{
		ModelBytes: s("cpu_total_size"), KVSelfBytes: s("kv_self_size"), KVCrossBytes: s("kv_cross_size"), KVPadBytes: s("kv_pad_size"),
		ComputeBytes: map[string]int64{
			"conv": s("compute_buffer_conv"), "encode": s("compute_buffer_encode"),
			"cross": s("compute_buffer_cross"), "decode": s("compute_buffer_decode"),
		},
	}
	rep.TotalBytes = rep.Sum()
	return rep
}

// compareEstimate checks each buffer and the total against
// estimator.Estimate for the same file, whisper.cpp profile, device cpu.
func compareEstimate(t *testing.T, model string, fa bool, got plugins.MemoryReport) {
	t.Helper()
	h, err := ggml.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	res, err := estimator.New(estimator.Config{Device: "cpu"}, nil).Estimate(estimator.Request{
		Backend: estimator.WhisperCpp, Model: "tiny.en", Header: h, FlashAttention: &fa,
	})
	if err != nil {
		t.Fatal(err)
	}
	w := res.WhisperCpp
	pairs := []struct {
		name           string
		backend, estim int64
	}{
		{"model", got.ModelBytes, w.Model},
		{"kv_self", got.KVSelfBytes, w.KVSelf},
		{"kv_cross", got.KVCrossBytes, w.KVCross},
		{"kv_pad", got.KVPadBytes, w.KVPad},
		{"conv", got.ComputeBytes["conv"], w.ComputeConv},
		{"encode", got.ComputeBytes["encode"], w.ComputeEncode},
		{"cross", got.ComputeBytes["cross"], w.ComputeCross},
		{"decode", got.ComputeBytes["decode"], w.ComputeDecode},
		{"total", got.TotalBytes, res.FormulaBytes},
	}
	for _, p := range pairs {
		dev := math.Abs(float64(p.backend-p.estim)) / float64(p.estim)
		t.Logf("flash attention %v: %-8s backend %11d  estimator %11d  %+.3f%%", fa, p.name, p.backend, p.estim, 100*float64(p.backend-p.estim)/float64(p.estim))
		if dev > 0.05 {
			t.Errorf("flash attention %v: %s: backend %d, estimator %d: %.1f%% apart (> 5%%)", fa, p.name, p.backend, p.estim, 100*dev)
		}
	}
}

// TestLoadWithoutGPU: on a host whose ggml has no GPU backend (this one, or
// any host under the sim inventory provider), cuda:0 loads on the CPU, says
// so in Info, and reports the CPU buffers; an index beyond the GPUs ggml
// sees is refused where there are GPUs.
func TestLoadWithoutGPU(t *testing.T) {
	impl := newBackend(t, Options{})
	if slices.ContainsFunc(impl.devs, func(d ggmlDevice) bool { return d.gpu }) {
		t.Skip("ggml has a GPU backend here")
	}
	b := plugintest.Connect(t, impl)
	rep, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: tinyEN(t), Device: "cuda:0"})
	if err != nil {
		t.Fatal(err)
	}
	if !reportsEqual(rep, logged(false)) {
		t.Errorf("report %+v, want the CPU figures %+v", rep, logged(false))
	}
	info, err := b.Info(t.Context())
	if err != nil || info.Metadata["device"] != "cpu" || slices.Contains(info.Devices, "cuda") {
		t.Errorf("info %+v, %v: want device cpu, no cuda", info, err)
	}
}

// TestTranscribeStreams: jfk.wav through tiny.en streams rising progress
// ending in exactly one 100 as the last event; the weightless model yields
// no segments and no text.
func TestTranscribeStreams(t *testing.T) {
	b := plugintest.Connect(t, loaded(t, Options{}, tinyEN(t)))
	var ev events
	res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t), Language: "auto"}, ev.emit)
	if err != nil {
		t.Fatal(err)
	}
	if res.Language != "en" || res.Duration != 11*time.Second || res.Text != "" || len(res.Segments) != 0 {
		t.Errorf("result %+v: want en, 11 s, no text or segments from a zero-weight model", res)
	}
	checkProgress(t, ev)
	if len(ev.segments) != 0 {
		t.Errorf("segments %v from a zero-weight model", ev.segments)
	}
}

// checkProgress: values within 0..100, rising, the last event a single 100.
func checkProgress(t *testing.T, ev events) {
	t.Helper()
	t.Logf("progress %v", ev.progress)
	if len(ev.progress) < 2 || ev.progress[0] != 0 {
		t.Fatalf("progress %v: want 0 first, then more", ev.progress)
	}
	for i := 1; i < len(ev.progress); i++ {
		if ev.progress[i] <= ev.progress[i-1] || ev.progress[i] > 100 {
			t.Errorf("progress %v: not rising within 0..100", ev.progress)
		}
	}
	if ev.order[len(ev.order)-1] != plugins.EventProgress || ev.progress[len(ev.progress)-1] != 100 {
		t.Errorf("last event %v / progress %v: want progress 100 last", ev.order, ev.progress)
	}
}

// TestTranscribeCancel: cancelling the host's context on the first progress
// event stops whisper.cpp mid-file (33 s of audio, two 30 s windows): the
// call fails with context.Canceled without reaching 100 %, and the backend
// transcribes again afterwards.
func TestTranscribeCancel(t *testing.T) {
	impl := loaded(t, Options{}, tinyEN(t))
	long := repeatWAV(t, 3)
	for _, via := range []struct {
		name string
		b    plugins.Backend
	}{{"in process", impl}, {"over gRPC", plugintest.Connect(t, impl)}} {
		ctx, cancel := context.WithCancel(t.Context())
		var ev events
		_, err := via.b.Transcribe(ctx, plugins.TranscribeRequest{AudioPath: long}, func(e plugins.Event) error {
			cancel()
			return ev.emit(e)
		})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: error %v, want context.Canceled", via.name, err)
		}
		if slices.Contains(ev.progress, 100) {
			t.Errorf("%s: progress %v reached 100 after the cancel", via.name, ev.progress)
		}
		t.Logf("%s: %v after progress %v", via.name, err, ev.progress)
	}
	if _, err := impl.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, nil); err != nil {
		t.Errorf("after cancellations: %v", err)
	}
}

// TestLoadErrors maps refusals to the SDK's sentinels, across gRPC.
func TestLoadErrors(t *testing.T) {
	model := tinyEN(t)
	data, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  plugins.LoadRequest
		want error
	}{
		{"missing model", plugins.LoadRequest{ModelPath: model + ".missing", Device: "cpu"}, plugins.ErrModelNotFound},
		{"not a ggml file", plugins.LoadRequest{ModelPath: writeTempFile(t, "model.bin", []byte("GGUF and then some")), Device: "cpu"}, plugins.ErrBadModel},
		{"empty file", plugins.LoadRequest{ModelPath: writeTempFile(t, "empty.bin", nil), Device: "cpu"}, plugins.ErrBadModel},
		{"truncated in the vocabulary", plugins.LoadRequest{ModelPath: writeTempFile(t, "cut.bin", data[:4000]), Device: "cpu"}, plugins.ErrBadModel},
		{"bad device", plugins.LoadRequest{ModelPath: model, Device: "tpu"}, plugins.ErrBadRequest},
		{"GPU UUID", plugins.LoadRequest{ModelPath: model, Device: "GPU-12345678-1234-1234-1234-123456789abc"}, plugins.ErrBadRequest},
		{"negative threads", plugins.LoadRequest{ModelPath: model, Device: "cpu", Threads: -1}, plugins.ErrBadRequest},
		{"missing VAD model", plugins.LoadRequest{ModelPath: model, Device: "cpu", VADModelPath: model + ".vad"}, plugins.ErrModelNotFound},
		{"VAD model not ggml", plugins.LoadRequest{ModelPath: model, Device: "cpu", VADModelPath: writeTempFile(t, "vad.onnx", []byte("onnx"))}, plugins.ErrBadModel},
	}
	b := plugintest.Connect(t, newBackend(t, Options{}))
	for _, tt := range tests {
		if _, err := b.Load(t.Context(), tt.req); !errors.Is(err, tt.want) {
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.want)
		}
	}
	if err := b.Health(t.Context()); err != nil {
		t.Errorf("health after refused loads: %v", err)
	}
}

// TestTranscribeErrors: bad audio and bad options are the caller's fault
// and say so; the backend stays healthy.
func TestTranscribeErrors(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no ffmpeg, whatever the machine has
	wav := pcm16WAV(16000, 1, make([]float32, 1600))
	tests := []struct {
		name string
		req  plugins.TranscribeRequest
		want error
	}{
		{"missing audio", plugins.TranscribeRequest{AudioPath: "/nonexistent/a.wav"}, plugins.ErrBadAudio},
		{"corrupt WAV", plugins.TranscribeRequest{AudioPath: writeTempFile(t, "bad.wav", wav[:30])}, plugins.ErrBadAudio},
		{"empty data chunk", plugins.TranscribeRequest{AudioPath: writeTempFile(t, "empty.wav", pcm16WAV(16000, 1, nil))}, plugins.ErrBadAudio},
		{"mp3 without ffmpeg", plugins.TranscribeRequest{AudioPath: writeTempFile(t, "a.mp3", []byte("ID3\x04\x00 not wav"))}, plugins.ErrBadAudio},
		{"unknown language", plugins.TranscribeRequest{AudioPath: writeTempFile(t, "a.wav", wav), Language: "xx"}, plugins.ErrBadRequest},
		{"German on an English-only model", plugins.TranscribeRequest{AudioPath: writeTempFile(t, "b.wav", wav), Language: "de"}, plugins.ErrBadRequest},
		{"VAD without a VAD model", plugins.TranscribeRequest{AudioPath: writeTempFile(t, "c.wav", wav), VAD: true}, plugins.ErrBadRequest},
		{"beam of 9", plugins.TranscribeRequest{AudioPath: writeTempFile(t, "d.wav", wav), BeamSize: 9}, plugins.ErrBadRequest},
		{"bad threads", plugins.TranscribeRequest{AudioPath: writeTempFile(t, "e.wav", wav), Extra: map[string]string{ExtraThreads: "0"}}, plugins.ErrBadRequest},
		{"bad temperature", plugins.TranscribeRequest{AudioPath: writeTempFile(t, "f.wav", wav), Extra: map[string]string{ExtraTemperature: "2"}}, plugins.ErrBadRequest},
	}
	b := plugintest.Connect(t, newBackend(t, Options{}))
	if _, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, nil); !errors.Is(err, plugins.ErrNotLoaded) {
		t.Errorf("before Load: %v, want ErrNotLoaded", err)
	}
	if _, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: tinyEN(t), Device: "cpu"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		if _, err := b.Transcribe(t.Context(), tt.req, nil); !errors.Is(err, tt.want) {
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.want)
		}
	}
	if err := b.Health(t.Context()); err != nil {
		t.Errorf("health: %v", err)
	}
	if err := b.Unload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, nil); !errors.Is(err, plugins.ErrNotLoaded) {
		t.Errorf("after Unload: %v, want ErrNotLoaded", err)
	}
}
