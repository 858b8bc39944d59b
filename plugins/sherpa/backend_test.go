package sherpa

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/estimator/onnx/onnxtest"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/internal/audio"
	"github.com/wsched/wsched/plugins/sherpa/modeldir"
)

// TestGeneratedSenseVoice loads the generated SenseVoice-shaped model into
// sherpa-onnx and decodes jfk.wav: the text is noise, but the recognizer,
// the events and the result are real.
func TestGeneratedSenseVoice(t *testing.T) {
	b := loaded(t, plugins.LoadRequest{Device: "cpu", Threads: 1})
	info, err := b.Info(t.Context())
	if err != nil || info.Metadata["kind"] != "sense_voice" || info.Metadata["device"] != "cpu" || info.Metadata["language"] != "auto" {
		t.Fatalf("info: %+v %v", info, err)
	}
	var events []plugins.Event
	res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, func(ev plugins.Event) error {
		events = append(events, ev)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Duration != 11*time.Second || len(res.Segments) != 1 || res.Text == "" || res.Segments[0].Text != res.Text {
		t.Fatalf("result: %+v", res)
	}
	if s := res.Segments[0]; s.Start != 0 || s.End != 11*time.Second {
		t.Errorf("segment %v–%v, want the whole 11 s", s.Start, s.End)
	}
	if len(events) != 2 || events[0].Kind != plugins.EventSegment || events[1] != plugins.ProgressEvent(100) {
		t.Errorf("events: %+v", events)
	}
	t.Logf("text (random weights): %.80q…", res.Text)
}

// TestWindows cuts audio longer than Window into windows: one segment per
// window that has text, at the window's place, progress rising to 100.
func TestWindows(t *testing.T) {
	b := loaded(t, plugins.LoadRequest{Device: "cpu", Threads: 1})
	long := repeatWAV(t, jfk(t), 6) // 66 s: windows at 0, 30 and 60 s
	var progress []float64
	res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: long}, func(ev plugins.Event) error {
		if ev.Kind == plugins.EventProgress {
			progress = append(progress, ev.Percent)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Duration != 66*time.Second || len(res.Segments) != 3 {
		t.Fatalf("result: %v, %d segments", res.Duration, len(res.Segments))
	}
	for i, s := range res.Segments {
		if s.Index != i || s.Start != time.Duration(i)*Window || s.End != min(time.Duration(i+1)*Window, 66*time.Second) {
			t.Errorf("segment %d: %+v", i, s)
		}
	}
	if len(progress) != 3 || progress[0] >= progress[1] || progress[2] != 100 {
		t.Errorf("progress %v", progress)
	}
}

func TestLoadGPUWithoutCUDAProvider(t *testing.T) {
	b, logs := newBackend(t)
	if b.cuda != "" {
		t.Skipf("this ONNX Runtime has a CUDA provider (%s)", b.cuda)
	}
	dir := senseVoiceDir(t, onnxtest.SenseVoiceOptions{})
	if _, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: dir, Device: "cuda:0"}); err != nil {
		t.Fatal(err)
	}
	defer b.Unload(t.Context())
	info, _ := b.Info(t.Context())
	if info.Metadata["device"] != "cpu" || info.Metadata["provider"] != "cpu" || strings.Count(logs.String(), "level=WARN") != 1 {
		t.Errorf("device %q provider %q; log:\n%s", info.Metadata["device"], info.Metadata["provider"], logs.String())
	}
}

func TestLoadErrors(t *testing.T) {
	b, _ := newBackend(t)
	noTokens := senseVoiceDir(t, onnxtest.SenseVoiceOptions{})
	_ = os.Remove(filepath.Join(noTokens, "tokens.txt"))
	for _, tt := range []struct {
		name string
		req  plugins.LoadRequest
		want error
		says string
	}{
		{"missing", plugins.LoadRequest{ModelPath: filepath.Join(t.TempDir(), "nope")}, plugins.ErrModelNotFound, "no such file"},
		{"no tokens", plugins.LoadRequest{ModelPath: noTokens}, plugins.ErrBadModel, "tokens.txt"},
		// sherpa-onnx would exit the process on this one
		{"metadata", plugins.LoadRequest{ModelPath: senseVoiceDir(t, onnxtest.SenseVoiceOptions{Drop: []string{"lang_ko"}})}, plugins.ErrBadModel, "lang_ko"},
		{"not onnx", plugins.LoadRequest{ModelPath: notONNX(t)}, plugins.ErrBadModel, "onnx"},
		{"language", plugins.LoadRequest{ModelPath: senseVoiceDir(t, onnxtest.SenseVoiceOptions{}), Extra: map[string]string{"language": "fr"}}, plugins.ErrBadRequest, "fr"},
		{"itn", plugins.LoadRequest{ModelPath: senseVoiceDir(t, onnxtest.SenseVoiceOptions{}), Extra: map[string]string{"itn": "maybe"}}, plugins.ErrBadRequest, "itn"},
		{"device", plugins.LoadRequest{ModelPath: senseVoiceDir(t, onnxtest.SenseVoiceOptions{}), Device: "tpu"}, plugins.ErrBadRequest, "tpu"},
		{"vad", plugins.LoadRequest{ModelPath: senseVoiceDir(t, onnxtest.SenseVoiceOptions{}), VADModelPath: "/nonexistent/silero.onnx"}, plugins.ErrModelNotFound, "VAD"},
		// sherpa-onnx would exit the process on this one too
		{"not a VAD", plugins.LoadRequest{ModelPath: senseVoiceDir(t, onnxtest.SenseVoiceOptions{}), VADModelPath: filepath.Join(senseVoiceDir(t, onnxtest.SenseVoiceOptions{}), "model.onnx")}, plugins.ErrBadModel, "not silero VAD"},
	} {
		_, err := b.Load(t.Context(), tt.req)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: %v, want %v saying %q", tt.name, err, tt.want, tt.says)
		}
	}
	if _, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, nil); !errors.Is(err, plugins.ErrNotLoaded) {
		t.Errorf("transcribe with nothing loaded: %v", err)
	}
}

func TestTranscribeErrors(t *testing.T) {
	b := loaded(t, plugins.LoadRequest{Device: "cpu", Threads: 1, Extra: map[string]string{"language": "en", "itn": "false"}})
	info, _ := b.Info(t.Context())
	if info.Metadata["language"] != "en" || info.Metadata["itn"] != "false" {
		t.Errorf("info: %v", info.Metadata)
	}
	corrupt := filepath.Join(t.TempDir(), "corrupt.wav")
	_ = os.WriteFile(corrupt, append([]byte("RIFF\x24\x00\x00\x00WAVEfmt "), make([]byte, 7)...), 0o644)
	if _, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: corrupt}, nil); !errors.Is(err, plugins.ErrBadAudio) {
		t.Errorf("corrupt WAV: %v", err)
	}
	if _, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t), Translate: true}, nil); !errors.Is(err, plugins.ErrBadRequest) {
		t.Errorf("translate: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Transcribe(ctx, plugins.TranscribeRequest{AudioPath: jfk(t)}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	stop := errors.New("host went away")
	if _, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, func(plugins.Event) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("emit error: %v", err)
	}
	res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, nil)
	if err != nil || res.Language != "en" {
		t.Errorf("language loaded as en: %q %v", res.Language, err)
	}
}

func notONNX(t *testing.T) string {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "model.onnx"), []byte("this is not protobuf"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "tokens.txt"), []byte(onnxtest.Tokens(30)), 0o644)
	return dir
}

// repeatWAV writes name's audio n times over as a 16 kHz 16-bit WAV.
func repeatWAV(t *testing.T, name string, n int) string {
	t.Helper()
	samples, err := audio.Decoder{}.Decode(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	pcm := make([]byte, 0, 2*n*len(samples))
	for range n {
		for _, s := range samples {
			pcm = binary.LittleEndian.AppendUint16(pcm, uint16(int16(math.Round(float64(s)*32767))))
		}
	}
	hdr := []byte("RIFF\x00\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00")
	hdr = binary.LittleEndian.AppendUint32(hdr, audio.SampleRate)
	hdr = binary.LittleEndian.AppendUint32(hdr, 2*audio.SampleRate)
	hdr = append(hdr, 2, 0, 16, 0)
	hdr = append(hdr, "data"...)
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(pcm)))
	binary.LittleEndian.PutUint32(hdr[4:], uint32(len(hdr)-8+len(pcm)))
	path := filepath.Join(t.TempDir(), "long.wav")
	if err := os.WriteFile(path, append(hdr, pcm...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGeneratedParaformer: a Paraformer-shaped model is told apart from
// SenseVoice by its metadata, loaded by sherpa-onnx's Paraformer recognizer
// and decodes jfk.wav.
func TestGeneratedParaformer(t *testing.T) {
	dir := t.TempDir()
	if _, err := onnxtest.WriteParaformer(dir, onnxtest.SenseVoiceOptions{}); err != nil {
		t.Fatal(err)
	}
	b := loaded(t, plugins.LoadRequest{ModelPath: dir, Device: "cpu", Threads: 1})
	if info, _ := b.Info(t.Context()); info.Metadata["kind"] != "paraformer" || info.Metadata["language"] != "" {
		t.Fatalf("info: %v", info.Metadata)
	}
	res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, nil)
	if err != nil || res.Duration != 11*time.Second || len(res.Segments) != 1 || res.Text == "" {
		t.Fatalf("%+v %v", res, err)
	}
	t.Logf("text (random weights): %.60q…", res.Text)
}

func TestLanguageOf(t *testing.T) {
	for _, tt := range []struct {
		kind              modeldir.Kind
		loaded, got, want string
	}{
		{modeldir.SenseVoice, "auto", "<|zh|>", "zh"},
		{modeldir.SenseVoice, "auto", "<|w37|>", ""},
		{modeldir.SenseVoice, "en", "noise", "en"},
		{modeldir.Whisper, "", "de", "de"},
		{modeldir.Paraformer, "", "", ""},
	} {
		m := &model{dir: modeldir.Dir{Kind: tt.kind}, language: tt.loaded}
		if got := m.languageOf(recognition{lang: tt.got}); got != tt.want {
			t.Errorf("%s loaded %q, detected %q: %q, want %q", tt.kind, tt.loaded, tt.got, got, tt.want)
		}
	}
}

// TestGeneratedWhisper: an encoder/decoder pair with Whisper's interface
// goes through sherpa-onnx's Whisper recognizer and greedy search.
func TestGeneratedWhisper(t *testing.T) {
	dir := t.TempDir()
	if err := onnxtest.WriteWhisper(dir, 1); err != nil {
		t.Fatal(err)
	}
	b := loaded(t, plugins.LoadRequest{ModelPath: dir, Device: "cpu", Threads: 1})
	if info, _ := b.Info(t.Context()); info.Metadata["kind"] != "whisper" {
		t.Fatalf("info: %v", info.Metadata)
	}
	res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, nil)
	if err != nil || res.Duration != 11*time.Second || len(res.Segments) != 1 || res.Text == "" {
		t.Fatalf("%+v %v", res, err)
	}
	t.Logf("text (random weights): %.60q…", res.Text)
}

// TestWhisperWindows: Whisper pieces stay under sherpa-onnx's 29.5 s cut.
func TestWhisperWindows(t *testing.T) {
	dir := t.TempDir()
	if err := onnxtest.WriteWhisper(dir, 2); err != nil {
		t.Fatal(err)
	}
	b := loaded(t, plugins.LoadRequest{ModelPath: dir, Device: "cpu", Threads: 1})
	res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: repeatWAV(t, jfk(t), 3)}, nil)
	if err != nil || len(res.Segments) != 2 || res.Segments[0].End != 29*time.Second || res.Segments[1].End != 33*time.Second {
		t.Fatalf("33 s of audio: %+v %v", res.Segments, err)
	}
}
