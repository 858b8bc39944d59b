package httpapi

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
)

// FuzzJobForm feeds the form fields of uploads and of the OpenAI endpoint
// (VAD fields, temperature, granularities) through their parsing and
// validation: it never panics, a refusal is a 400 naming a field, and what
// is accepted is finite and encodes as JSON (issue 25 item 14: NaN in a form
// was a 500, and a job that could not be stored).
func FuzzJobForm(f *testing.F) {
	for _, s := range [][2]string{
		{"vad_threshold", "NaN"}, {"vad_threshold", "0.5"}, {"vad_threshold", "+Inf"}, {"vad_max_speech_s", "nan"},
		{"vad_max_speech_s", "-0"}, {"vad_min_speech_ms", "99999999999999999999"}, {"temperature", "NaN"},
		{"temperature", "1e-400"}, {"vad", "TRUE"}, {"vad_model", "../x"}, {"timestamp_granularities[]", "word,segment"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, field, value string) {
		req, err := openAIRequest(map[string]string{field: value}, false)
		if err == nil {
			_, err = jobVAD(req.VADOptions)
		}
		if err != nil {
			var he *httpError
			if !errors.As(err, &he) || he.status != http.StatusBadRequest || !strings.Contains(err.Error(), "field ") {
				t.Fatalf("%s=%q: %v, want a 400 naming the field", field, value, err)
			}
			return
		}
		for _, x := range []float64{req.Temperature, req.VADThreshold, req.VADMaxSpeechS} {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("%s=%q accepted as %v", field, value, x)
			}
		}
		if _, err := json.Marshal(req); err != nil {
			t.Fatalf("%s=%q: accepted, but %v", field, value, err)
		}
	})
}
