//go:build whisper

package whisper

import (
	"fmt"
	"strconv"
	"strings"

	wcpp "github.com/ggerganov/whisper.cpp/bindings/go"

	"github.com/wsched/wsched/plugins"
)

// TranscribeRequest.Extra keys the backend reads; others are ignored.
const (
	// ExtraThreads overrides the thread count Load was given.
	ExtraThreads = "threads"
	// ExtraTemperature is the initial sampling temperature (default 0).
	ExtraTemperature = "temperature"
	// ExtraTemperatureInc is whisper.cpp's temperature_inc (default 0.2); 0
	// turns the temperature fallback off, and with it the best_of decoders
	// that make whisper_full regrow the KV self cache.
	ExtraTemperatureInc = "temperature_inc"
)

// ExtraMaxStreams in a LoadRequest's Extra is the instance's max_streams:
// how many Transcribe calls run at once (default Options.MaxStreams).
const ExtraMaxStreams = plugins.ExtraMaxStreams

// maxDecoders is WHISPER_MAX_DECODERS: whisper_full fails above it.
const maxDecoders = 8

// decodeOptions are one Transcribe call's choices; zero values keep
// whisper.cpp's defaults: greedy decoding with best_of 5 and temperature
// fallback 0.2, min(4, cores) threads.
type decodeOptions struct {
	language  int // whisper.cpp language id; -1: detect
	translate bool
	threads   int
	beamSize  int // > 1: beam search
	bestOf    int
	prompt    string
	vad       bool
	vadParams plugins.VADParams
	temp      *float32
	tempInc   *float32
}

// decodeOptions validates req against the loaded model.
func (m *model) decodeOptions(req plugins.TranscribeRequest) (decodeOptions, error) {
	o := decodeOptions{translate: req.Translate && m.multilingual, threads: m.threads, prompt: req.InitialPrompt}
	var err error
	if o.language, err = m.language(req.Language); err != nil {
		return o, err
	}
	if req.BeamSize < 0 || req.BeamSize > maxDecoders || req.BestOf < 0 || req.BestOf > maxDecoders {
		return o, fmt.Errorf("%w: beam size %d, best-of %d: each must be 0 to %d", plugins.ErrBadRequest, req.BeamSize, req.BestOf, maxDecoders)
	}
	o.beamSize, o.bestOf = req.BeamSize, req.BestOf
	if req.VAD && m.vadModel.p == nil {
		return o, fmt.Errorf("%w: VAD asked for, but no VAD model was given at load", plugins.ErrBadRequest)
	}
	o.vad, o.vadParams = req.VAD, req.VADParams
	if v := req.VADParams; v.Threshold < 0 || v.Threshold > 1 || v.MinSpeech < 0 || v.MinSilence < 0 || v.MaxSpeech < 0 || v.SpeechPad < 0 {
		return o, fmt.Errorf("%w: VAD parameters %+v: threshold must be 0 to 1, durations not negative", plugins.ErrBadRequest, v)
	}
	return o, o.extra(req.Extra)
}

func (o *decodeOptions) extra(extra map[string]string) error {
	if v, ok := extra[ExtraThreads]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%w: %s=%q: want a positive count", plugins.ErrBadRequest, ExtraThreads, v)
		}
		o.threads = n
	}
	var err error
	if o.temp, err = unitFloat(extra, ExtraTemperature); err != nil {
		return err
	}
	o.tempInc, err = unitFloat(extra, ExtraTemperatureInc)
	return err
}

// unitFloat reads extra[key] as a number from 0 to 1; nil when absent.
func unitFloat(extra map[string]string, key string) (*float32, error) {
	v, ok := extra[key]
	if !ok {
		return nil, nil
	}
	f, err := strconv.ParseFloat(v, 32)
	if err != nil || f < 0 || f > 1 {
		return nil, fmt.Errorf("%w: %s=%q: want 0 to 1", plugins.ErrBadRequest, key, v)
	}
	f32 := float32(f)
	return &f32, nil
}

// language resolves an ISO 639-1 code to whisper.cpp's id. "" and "auto"
// detect on multilingual models; English-only models take only "en".
func (m *model) language(lang string) (int, error) {
	lang = strings.ToLower(strings.TrimSpace(lang))
	if lang == "" || lang == "auto" {
		if m.multilingual {
			return -1, nil
		}
		lang = "en"
	}
	id := -1
	for i := range wcpp.Whisper_lang_max_id() + 1 {
		if wcpp.Whisper_lang_str(i) == lang {
			id = i
			break
		}
	}
	switch {
	case id < 0:
		return 0, fmt.Errorf("%w: unknown language %q (want an ISO 639-1 code such as en, de, zh, or auto)", plugins.ErrBadRequest, lang)
	case !m.multilingual && lang != "en":
		return 0, fmt.Errorf("%w: language %q: %s is an English-only model", plugins.ErrBadRequest, lang, m.path)
	}
	return id, nil
}

// params builds whisper_full_params; free releases its C strings once
// whisper_full has returned.
func (o decodeOptions) params(m *model) (p fullParams, free func()) {
	p = newFullParams(o.beamSize > 1)
	wp := p.bindings()
	wp.SetPrintProgress(false)
	wp.SetPrintRealtime(false)
	wp.SetPrintTimestamps(false)
	_ = wp.SetLanguage(o.language) // -1 (detect) or an id checked by language
	wp.SetTranslate(o.translate)
	if o.threads > 0 {
		wp.SetThreads(o.threads)
	}
	if o.beamSize > 1 {
		wp.SetBeamSize(o.beamSize)
	}
	if o.bestOf > 0 {
		p.setBestOf(o.bestOf)
	}
	if o.temp != nil {
		wp.SetTemperature(*o.temp)
	}
	if o.tempInc != nil {
		wp.SetTemperatureFallback(*o.tempInc)
	}
	var prompt cString
	if o.prompt != "" {
		prompt = newCString(o.prompt)
		p.setPrompt(prompt)
	}
	if o.vad {
		p.setVAD(m.vadModel)
		p.setVADParams(o.vadParams)
	}
	return p, func() {
		p.free()
		prompt.free()
	}
}
