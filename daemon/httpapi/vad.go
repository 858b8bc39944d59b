package httpapi

import (
	"math"
	"strconv"
	"strings"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/jobs"
)

// vadFromForm reads the VAD form fields of multipart uploads and the OpenAI
// endpoint, named as the JSON fields (vad, vad_model, vad_threshold,
// vad_min_speech_ms, vad_min_silence_ms, vad_max_speech_s,
// vad_speech_pad_ms); absent fields stay zero.
func vadFromForm(form map[string]string) (api.VADOptions, error) {
	var o api.VADOptions
	if v, ok := form["vad"]; ok && v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, badRequest("invalid_field", "field vad: %q is not allowed: want true or false", v)
		}
		o.VAD = &b
	}
	o.VADModel = form["vad_model"]
	floats := []struct {
		name string
		dst  *float64
	}{{"vad_threshold", &o.VADThreshold}, {"vad_max_speech_s", &o.VADMaxSpeechS}}
	for _, f := range floats {
		if v := form[f.name]; v != "" {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				return o, badRequest("invalid_field", "field %s: %q is not a number", f.name, v)
			}
			*f.dst = x
		}
	}
	ints := []struct {
		name string
		dst  *int
	}{{"vad_min_speech_ms", &o.VADMinSpeechMS}, {"vad_min_silence_ms", &o.VADMinSilenceMS}, {"vad_speech_pad_ms", &o.VADSpeechPadMS}}
	for _, f := range ints {
		if v := form[f.name]; v != "" {
			x, err := strconv.Atoi(v)
			if err != nil {
				return o, badRequest("invalid_field", "field %s: %q is not a whole number of milliseconds", f.name, v)
			}
			*f.dst = x
		}
	}
	return o, nil
}

// maxVADMillis bounds the millisecond fields (an hour).
const maxVADMillis = 3600_000

// jobVAD validates a request's VAD options into the job's.
func jobVAD(o api.VADOptions) (jobs.VADOptions, error) {
	switch {
	case o.VADModel != "" && (strings.ContainsAny(o.VADModel, `/\`) || o.VADModel == "." || o.VADModel == ".."):
		return jobs.VADOptions{}, badRequest("invalid_field", "field vad_model: %q is not allowed: want the name of a file in [models] dir, e.g. ggml-silero-v5.1.2.bin", o.VADModel)
	case !(o.VADThreshold >= 0 && o.VADThreshold <= 1): // NaN fails both
		return jobs.VADOptions{}, badRequest("invalid_field", "field vad_threshold: %v is not allowed: want 0 to 1 (0: the model's default)", o.VADThreshold)
	case !(o.VADMaxSpeechS >= 0 && o.VADMaxSpeechS <= maxVADMillis/1000):
		return jobs.VADOptions{}, badRequest("invalid_field", "field vad_max_speech_s: %v is not allowed: want 0 to 3600", o.VADMaxSpeechS)
	}
	for name, v := range map[string]int{"vad_min_speech_ms": o.VADMinSpeechMS, "vad_min_silence_ms": o.VADMinSilenceMS, "vad_speech_pad_ms": o.VADSpeechPadMS} {
		if v < 0 || v > maxVADMillis {
			return jobs.VADOptions{}, badRequest("invalid_field", "field %s: %d is not allowed: want 0 to %d", name, v, maxVADMillis)
		}
	}
	return jobs.VADOptions(o), nil
}
