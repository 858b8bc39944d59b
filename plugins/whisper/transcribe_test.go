//go:build whisper

package whisper

import (
	"errors"
	"math"
	"os/exec"
	"testing"
	"time"

	wcpp "github.com/ggerganov/whisper.cpp/bindings/go"

	"github.com/wsched/wsched/plugins"
)

// TestDecodeOptions: what each request turns into in whisper_full_params.
// Zero values keep whisper.cpp's defaults (greedy, best_of 5, fallback 0.2).
func TestDecodeOptions(t *testing.T) {
	en, multi := loaded(t, Options{}, tinyEN(t)), loaded(t, Options{}, tiny(t))
	type params struct {
		language         string // whisper_full_params.language; "" = detect
		beam             bool
		bestOf, beamSize int
		temp, tempInc    float32
	}
	greedy := func(lang string) params { return params{language: lang, bestOf: 5, beamSize: -1, tempInc: 0.2} }
	tests := []struct {
		name string
		b    *Backend
		req  plugins.TranscribeRequest
		want params
	}{
		{"defaults, English-only", en, plugins.TranscribeRequest{}, greedy("en")},
		{"auto, English-only", en, plugins.TranscribeRequest{Language: "auto"}, greedy("en")},
		{"auto, multilingual", multi, plugins.TranscribeRequest{Language: "auto"}, greedy("")},
		{"German", multi, plugins.TranscribeRequest{Language: " DE "}, greedy("de")},
		{"beam 5", en, plugins.TranscribeRequest{BeamSize: 5}, params{language: "en", beam: true, bestOf: -1, beamSize: 5, tempInc: 0.2}},
		{"beam 1 is greedy", en, plugins.TranscribeRequest{BeamSize: 1}, greedy("en")},
		{"best of 2", en, plugins.TranscribeRequest{BestOf: 2}, params{language: "en", bestOf: 2, beamSize: -1, tempInc: 0.2}},
		{"no fallback", en, plugins.TranscribeRequest{Extra: map[string]string{ExtraTemperatureInc: "0"}}, params{language: "en", bestOf: 5, beamSize: -1}},
		{"temperature", en, plugins.TranscribeRequest{Extra: map[string]string{ExtraTemperature: "0.4"}}, params{language: "en", bestOf: 5, beamSize: -1, temp: 0.4, tempInc: 0.2}},
	}
	for _, tt := range tests {
		m := tt.b.model
		o, err := m.decodeOptions(tt.req)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		p, free := o.params(m)
		got := params{beam: p.beamSearch(), bestOf: p.bestOf(), beamSize: p.beamSize(), temp: p.temperature(), tempInc: p.temperatureInc()}
		if id := p.bindings().Language(); id >= 0 {
			got.language = wcpp.Whisper_lang_str(id)
		}
		free()
		if got != tt.want {
			t.Errorf("%s: params %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestVADParams: a request's VAD parameters reach whisper_full_params over
// whisper.cpp's defaults; zero fields keep the defaults; bad ones are
// refused.
func TestVADParams(t *testing.T) {
	b := newBackend(t, Options{})
	// Any ggml file passes Load's check; the VAD model is read by whisper_full only.
	if _, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: tinyEN(t), Device: "cpu", VADModelPath: tinyEN(t)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Unload(t.Context()) })
	m := b.model
	get := func(req plugins.TranscribeRequest) plugins.VADParams {
		t.Helper()
		o, err := m.decodeOptions(req)
		if err != nil {
			t.Fatal(err)
		}
		p, free := o.params(m)
		defer free()
		if p.vadOn() != req.VAD {
			t.Errorf("vad %v, want %v", p.vadOn(), req.VAD)
		}
		return p.vadParams()
	}
	def := get(plugins.TranscribeRequest{VAD: true})
	if def.Threshold != 0.5 || def.MinSpeech != 250*time.Millisecond || def.MinSilence != 100*time.Millisecond || def.SpeechPad != 30*time.Millisecond {
		t.Errorf("whisper.cpp's defaults: %+v", def)
	}
	want := plugins.VADParams{Threshold: 0.25, MinSpeech: 100 * time.Millisecond, MinSilence: 300 * time.Millisecond, MaxSpeech: 20 * time.Second, SpeechPad: 50 * time.Millisecond}
	if got := get(plugins.TranscribeRequest{VAD: true, VADParams: want}); got != want {
		t.Errorf("set: %+v, want %+v", got, want)
	}
	partial := def
	partial.Threshold = 0.75
	if got := get(plugins.TranscribeRequest{VAD: true, VADParams: plugins.VADParams{Threshold: 0.75}}); got != partial {
		t.Errorf("threshold only: %+v, want %+v", got, partial)
	}
	if _, err := m.decodeOptions(plugins.TranscribeRequest{VAD: true, VADParams: plugins.VADParams{Threshold: 2}}); !errors.Is(err, plugins.ErrBadRequest) {
		t.Errorf("threshold 2: %v", err)
	}
}

// TestTranscribeFormats: a 44.1 kHz stereo WAV is downmixed and resampled
// (duration kept), and with ffmpeg on PATH an MP3 goes through it.
func TestTranscribeFormats(t *testing.T) {
	b := loaded(t, Options{}, tinyEN(t))
	stereo := make([]float32, 2*44100*3) // 3 s
	for i := range stereo {
		stereo[i] = float32(0.3 * math.Sin(float64(i/2)*2*math.Pi*440/44100))
	}
	res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: writeTempFile(t, "s.wav", pcm16WAV(44100, 2, stereo))}, nil)
	if err != nil || res.Duration != 3*time.Second {
		t.Errorf("44.1 kHz stereo: %+v, %v; want 3 s", res, err)
	}
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Log("ffmpeg is not installed: skipping the MP3 part")
		return
	}
	res, err = b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: sharedFile(t, "audio/jfk.mp3")}, nil)
	if err != nil || res.Duration != 11*time.Second {
		t.Errorf("jfk.mp3: %+v, %v; want 11 s", res, err)
	}
}

// TestTranscribeMultilingualDetect: "auto" on a multilingual model runs
// whisper.cpp's language detection and reports what it found.
func TestTranscribeMultilingualDetect(t *testing.T) {
	b := loaded(t, Options{}, tiny(t))
	var ev events
	res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t), Language: "auto",
		Extra: map[string]string{ExtraTemperatureInc: "0"}}, ev.emit)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Language) != 2 {
		t.Errorf("detected language %q: want an ISO 639-1 code", res.Language)
	}
	t.Logf("zero-weight tiny detects %q", res.Language)
	checkProgress(t, ev)
}
