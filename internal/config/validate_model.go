package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// ExecBackend is the backend name of models served by an existing app
// (wsched-backend-exec).
const ExecBackend = "exec"

// reservedExecEnv are variables the exec backend sets itself: the lease's
// device pinning and the app's port. An entry's env may not override them.
var reservedExecEnv = []string{"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "SENSEVOICE_DEVICE", "SENSEVOICE_PORT", "SENSEVOICE_HOST", "PORT"}

// validate checks one model entry; key is its dotted name with the entry's
// index ("models.model#2").
func (e Model) validate(key string) error {
	if err := e.validateVAD(key); err != nil {
		return err
	}
	if e.Backend == ExecBackend {
		return e.validateExec(key)
	}
	switch {
	case !filepath.IsAbs(e.Path):
		return bad(key+".path", "%q is not allowed: want an absolute path", e.Path)
	case len(e.Command) > 0:
		return bad(key+".command", "is only read for backend %q (this entry's backend is %q)", ExecBackend, e.Backend)
	case e.Dir != "" || len(e.Env) > 0 || e.Health != "" || e.Protocol != "" || e.Field != "" || e.TextJSONPath != "" || e.StartTimeout != 0:
		return bad(key+".backend", "%q: dir, env, health, protocol, field, text_json_path and start_timeout are only read for backend %q", e.Backend, ExecBackend)
	}
	return nil
}

func (e Model) validateVAD(key string) error {
	switch {
	case e.VADModel != "" && !filepath.IsAbs(e.VADModel):
		return bad(key+".vad_model", "%q is not allowed: want an absolute path", e.VADModel)
	case e.VAD && e.VADModel == "" && e.Backend != ExecBackend:
		return bad(key+".vad", "is true but vad_model is empty: want the VAD model file (whisper.cpp: a silero ggml file such as ggml-silero-v5.1.2.bin)")
	case e.VADThreshold < 0 || e.VADThreshold > 1:
		return bad(key+".vad_threshold", "%v is not allowed: want 0 to 1 (0: the backend's default)", e.VADThreshold)
	case e.VADMinSpeech < 0 || e.VADMinSilence < 0 || e.VADMaxSpeech < 0 || e.VADSpeechPadding < 0:
		return bad(key+".vad_min_speech", "negative VAD durations are not allowed")
	}
	return nil
}

func (e Model) validateExec(key string) error {
	switch {
	case len(e.Command) == 0 || strings.TrimSpace(e.Command[0]) == "":
		return bad(key+".command", "is empty: backend %q needs the command that starts the app, e.g. [\"python3\", \"main.py\"]", ExecBackend)
	case !filepath.IsAbs(e.Dir):
		return bad(key+".dir", "%q is not allowed: want the app's directory as an absolute path", e.Dir)
	case e.Memory <= 0:
		return bad(key+".memory", "is required for backend %q: no estimator knows an arbitrary app; measure its peak (wsched run -- %s, then wsched leases) and set it, e.g. memory = \"6GiB\"", ExecBackend, strings.Join(e.Command, " "))
	case e.Protocol != "" && e.Protocol != "openai" && e.Protocol != "multipart":
		return bad(key+".protocol", "%q is not allowed: want openai or multipart", e.Protocol)
	case e.Health != "" && !strings.HasPrefix(e.Health, "/"):
		return bad(key+".health", "%q is not allowed: want a route starting with /, e.g. \"/health\"", e.Health)
	case e.Path != "" && !strings.HasPrefix(e.Path, "/"):
		return bad(key+".path", "%q is not allowed: for backend %q it is the app's transcription route, starting with /", e.Path, ExecBackend)
	case e.Protocol != "multipart" && (e.Field != "" || e.TextJSONPath != ""):
		return bad(key+".protocol", "field and text_json_path are only read with protocol = \"multipart\"")
	case e.StartTimeout < 0:
		return bad(key+".start_timeout", "%s is not allowed: want a duration above 0", e.StartTimeout)
	case e.VAD || e.VADModel != "":
		return bad(key+".vad", "backend %q cannot do voice activity detection: it forwards the audio to the app as it is; remove vad and vad_model", ExecBackend)
	}
	for k := range e.Env {
		if slices.Contains(reservedExecEnv, k) || strings.HasPrefix(k, "WSCHED_") || k == "" || strings.Contains(k, "=") {
			return bad(key+".env", "%s: not allowed: the exec backend sets %s and WSCHED_* itself from the lease", fmt.Sprintf("%q", k), strings.Join(reservedExecEnv, ", "))
		}
	}
	return nil
}
