package sherpa

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	so "github.com/k2-fsa/sherpa-onnx-go-linux"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/internal/audio"
	"github.com/wsched/wsched/plugins/sherpa/modeldir"
)

// Window is the fixed piece length long audio is cut into without VAD: the
// 30 s SenseVoice is trained on (Whisper's pieces are 29 s: whisperWindow).
const Window = 30 * time.Second

// piece is a stretch of audio decoded on its own.
type piece struct {
	start   int // first sample
	samples []float32
}

// Transcribe decodes the audio file (WAV natively, anything else through
// ffmpeg), cuts it at pauses with the silero VAD model given at Load (or
// into Window-long pieces without one), and decodes the pieces in order,
// emitting after each its segment and the progress (100 last). Language
// and ITN are the ones given at Load: a SenseVoice recognizer cannot change
// them per call, so a request's language is only reported when the model
// did not detect one. Translation is not supported.
//
// Up to max_streams calls run at once: each piece is decoded in one
// DecodeStreams batch with the pieces of the other calls in flight (see
// batcher). The Result has no StreamMemory: ONNX Runtime reports no
// buffers, and a batch's memory is not one call's.
func (b *Backend) Transcribe(ctx context.Context, req plugins.TranscribeRequest, emit func(plugins.Event) error) (plugins.Result, error) {
	fail := func(err error) (plugins.Result, error) {
		return plugins.Result{}, fmt.Errorf("sherpa transcribe %s: %w", req.AudioPath, err)
	}
	if req.Translate {
		return fail(fmt.Errorf("%w: the sherpa-onnx backend does not translate", plugins.ErrBadRequest))
	}
	if b.loaded() == nil {
		return fail(plugins.ErrNotLoaded)
	}
	samples, err := b.decodeAudio(ctx, req.AudioPath)
	if err != nil {
		return fail(err)
	}
	if err := b.gate.Acquire(ctx, false); err != nil {
		return fail(err)
	}
	defer b.gate.Release(false)
	m := b.loaded() // unloaded or replaced while the audio decoded?
	if m == nil {
		return fail(plugins.ErrNotLoaded)
	}
	m.batch.join()
	defer m.batch.leave()
	pieces, err := m.cut(samples, req.VAD, b.log)
	if err != nil {
		return fail(err)
	}
	res, err := m.decode(ctx, pieces, len(samples), emit)
	if err != nil {
		return fail(err)
	}
	if res.Language == "" && req.Language != "" && req.Language != "auto" {
		res.Language = req.Language
	}
	res.Duration = time.Duration(len(samples)) * time.Second / audio.SampleRate
	return res, nil
}

func (b *Backend) loaded() *model {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.model
}

func (b *Backend) decodeAudio(ctx context.Context, path string) ([]float32, error) {
	return audio.ForBackend(ctx, b.ffmpeg(), path)
}

// decode runs the recognizer on each piece, in order, each in a batch with
// the pieces of the other calls in flight. The caller holds a stream.
func (m *model) decode(ctx context.Context, pieces []piece, total int, emit func(plugins.Event) error) (plugins.Result, error) {
	var res plugins.Result
	var text []string
	for i, p := range pieces {
		if err := ctx.Err(); err != nil {
			return plugins.Result{}, err
		}
		r, err := m.batch.recognize(ctx, p.samples)
		if err != nil {
			return plugins.Result{}, err
		}
		if res.Language == "" {
			res.Language = m.languageOf(r)
		}
		if t := strings.TrimSpace(r.text); t != "" {
			seg := plugins.Segment{Index: len(res.Segments), Start: sampleTime(p.start), End: sampleTime(p.start + len(p.samples)), Text: t}
			res.Segments = append(res.Segments, seg)
			text = append(text, t)
			if err := send(emit, plugins.SegmentEvent(seg)); err != nil {
				return plugins.Result{}, err
			}
		}
		pct := 100 * float64(p.start+len(p.samples)) / float64(total)
		if i == len(pieces)-1 {
			pct = 100
		}
		if err := send(emit, plugins.ProgressEvent(pct)); err != nil {
			return plugins.Result{}, err
		}
	}
	if len(pieces) == 0 {
		if err := send(emit, plugins.ProgressEvent(100)); err != nil {
			return plugins.Result{}, err
		}
	}
	res.Text = strings.Join(text, " ")
	return res, nil
}

func send(emit func(plugins.Event) error, ev plugins.Event) error {
	if emit == nil {
		return nil
	}
	return emit(ev)
}

// recognition is what one decode gave.
type recognition struct{ text, lang string }

// languageOf is the language a decode detected ("<|en|>" from SenseVoice,
// "en" from Whisper), else the one loaded; "" for auto with nothing
// detected.
func (m *model) languageOf(r recognition) string {
	lang := strings.TrimSuffix(strings.TrimPrefix(r.lang, "<|"), "|>")
	switch {
	case m.dir.Kind == modeldir.Whisper && lang != "":
		return lang // Whisper's detected code as is
	case senseVoiceLanguages[lang] && lang != "auto":
		return lang
	}
	if m.language != "auto" {
		return m.language
	}
	return ""
}

func sampleTime(n int) time.Duration { return time.Duration(n) * time.Second / audio.SampleRate }

// cut splits the audio: at pauses with the VAD model when one was loaded
// (or asked for: without a model that falls back to windows, with a
// warning), else into Window-long pieces.
func (m *model) cut(samples []float32, wantVAD bool, log *slog.Logger) ([]piece, error) {
	if m.vadModel != "" {
		return m.cutVAD(samples)
	}
	if wantVAD {
		log.Warn("VAD requested but no VAD model was loaded: cutting the audio into fixed windows", "window", m.window())
	}
	return windows(samples, int(m.window().Seconds())*audio.SampleRate), nil
}

// whisperWindow is the fixed piece for Whisper: sherpa-onnx truncates its
// input to 2950 feature frames (29.5 s), so pieces stay below that.
const whisperWindow = 29 * time.Second

func (m *model) window() time.Duration {
	if m.dir.Kind == modeldir.Whisper {
		return whisperWindow
	}
	return Window
}

// windows cuts samples into pieces of n.
func windows(samples []float32, n int) []piece {
	var out []piece
	for start := 0; start < len(samples); start += n {
		out = append(out, piece{start: start, samples: samples[start:min(start+n, len(samples))]})
	}
	return out
}

// vadWindow is silero VAD's window at 16 kHz.
const vadWindow = 512

// cutVAD finds the speech in samples with silero VAD; pieces are capped at
// Window (silero's max_speech_duration).
func (m *model) cutVAD(samples []float32) ([]piece, error) {
	cfg := &so.VadModelConfig{
		SileroVad: so.SileroVadModelConfig{Model: m.vadModel, Threshold: 0.5, MinSilenceDuration: 0.5,
			MinSpeechDuration: 0.25, WindowSize: vadWindow, MaxSpeechDuration: float32(Window.Seconds())},
		SampleRate: audio.SampleRate, NumThreads: 1, Provider: "cpu",
	}
	vad := so.NewVoiceActivityDetector(cfg, float32(Window.Seconds())+10)
	if vad == nil {
		return nil, fmt.Errorf("%w: sherpa-onnx refused the VAD model %s", plugins.ErrBadModel, m.vadModel)
	}
	defer so.DeleteVoiceActivityDetector(vad)
	var out []piece
	drain := func() {
		for !vad.IsEmpty() {
			s := vad.Front()
			out = append(out, piece{start: s.Start, samples: s.Samples})
			vad.Pop()
		}
	}
	for start := 0; start+vadWindow <= len(samples); start += vadWindow {
		vad.AcceptWaveform(samples[start : start+vadWindow])
		drain()
	}
	vad.Flush()
	drain()
	return out, nil
}
