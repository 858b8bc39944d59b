package config

import (
	"maps"
	"path/filepath"

	"github.com/wsched/wsched/estimator"
)

// MaxStreamsLimit bounds [[models.model]] max_streams (and the estimator's
// concurrency, wsched estimate --concurrency).
const MaxStreamsLimit = estimator.MaxConcurrency

// validate checks what one model entry says whatever its backend; key is
// its dotted name with the entry's index ("models.model#2"). What a backend
// reads (its options, whether it needs memory or can do VAD) is checked
// against the backend's descriptor once the daemon has discovered it
// (models.Check).
func (e Model) validate(key string) error {
	if err := e.validateVAD(key); err != nil {
		return err
	}
	switch {
	case e.Path != "" && !filepath.IsAbs(e.Path):
		return bad(key+".path", "%q is not allowed: want an absolute path", e.Path)
	case e.Dir != "" && !filepath.IsAbs(e.Dir):
		return bad(key+".dir", "%q is not allowed: want an absolute path", e.Dir)
	case e.StreamMemory < 0:
		return bad(key+".stream_memory", "%s is not allowed: want a size of 0 or more", e.StreamMemory)
	case e.Memory > 0 && e.StreamMemory > e.Memory:
		return bad(key+".stream_memory", "%s is more than memory %s (the instance with its first stream): want at most that", e.StreamMemory, e.Memory)
	case e.MaxStreams < 0 || e.MaxStreams > MaxStreamsLimit:
		return bad(key+".max_streams", "%d is not allowed: want 1 to %d (0 or absent: the backend's default)", e.MaxStreams, MaxStreamsLimit)
	}
	for k := range e.shorthands() {
		if _, dup := e.Options[k]; dup {
			return bad(key+".options."+k, "is also set as %s.%s: set it once", key, k)
		}
	}
	return nil
}

func (e Model) validateVAD(key string) error {
	switch {
	case e.VADModel != "" && !filepath.IsAbs(e.VADModel):
		return bad(key+".vad_model", "%q is not allowed: want an absolute path", e.VADModel)
	case e.VADThreshold < 0 || e.VADThreshold > 1:
		return bad(key+".vad_threshold", "%v is not allowed: want 0 to 1 (0: the backend's default)", e.VADThreshold)
	case e.VADMinSpeech < 0 || e.VADMinSilence < 0 || e.VADMaxSpeech < 0 || e.VADSpeechPadding < 0:
		return bad(key+".vad_min_speech", "negative VAD durations are not allowed")
	}
	return nil
}

// Settings are the options the entry gives its backend: its options table
// and the keys it sets at the top level that are shorthands for options of
// the same name (language, itn, command, dir, env, health, protocol, field,
// text_json_path, start_timeout). Values are as TOML decodes them (strings,
// bools, numbers, lists, tables); the backend's descriptor checks them.
func (e Model) Settings() map[string]any {
	out := e.shorthands()
	maps.Copy(out, e.Options)
	return out
}

// shorthands are the option keys set at the entry's top level.
func (e Model) shorthands() map[string]any {
	out := map[string]any{}
	put := func(k string, v any, set bool) {
		if set {
			out[k] = v
		}
	}
	put("language", e.Language, e.Language != "")
	put("itn", e.ITN != nil && *e.ITN, e.ITN != nil)
	put("command", e.Command, len(e.Command) > 0)
	put("dir", e.Dir, e.Dir != "")
	put("env", e.Env, len(e.Env) > 0)
	put("health", e.Health, e.Health != "")
	put("protocol", e.Protocol, e.Protocol != "")
	put("field", e.Field, e.Field != "")
	put("text_json_path", e.TextJSONPath, e.TextJSONPath != "")
	put("start_timeout", e.StartTimeout.D().String(), e.StartTimeout != 0)
	return out
}
