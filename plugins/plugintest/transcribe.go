package plugintest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wsched/wsched/plugins"
)

// Transcribe emits progress and segments one second of "audio" apiece,
// waiting segment_delay before each, and crashes after crash_after segments
// if told to.
func (f *Fake) Transcribe(ctx context.Context, req plugins.TranscribeRequest, emit func(plugins.Event) error) (plugins.Result, error) {
	fail := func(err error) (plugins.Result, error) {
		return plugins.Result{}, fmt.Errorf("fake transcribe %s: %w", req.AudioPath, err)
	}
	if err := f.script(ctx, "transcribe", TranscribeError, req.Extra); err != nil {
		return fail(err)
	}
	if err := f.leaseTooSmall(req.Extra); err != nil {
		return fail(err)
	}
	f.mu.Lock()
	loaded, vadModel := f.model != "", f.vad
	f.mu.Unlock()
	if !loaded {
		return fail(plugins.ErrNotLoaded)
	}
	if req.VAD && vadModel == "" {
		return fail(fmt.Errorf("%w: VAD asked for, but no VAD model was given at load", plugins.ErrBadRequest))
	}
	if _, err := os.Stat(req.AudioPath); err != nil {
		return fail(fmt.Errorf("%w: %w", plugins.ErrBadAudio, err))
	}
	sc, err := f.transcribeScript(req.Extra)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", plugins.ErrBadRequest, err))
	}
	progress := func(p float64) float64 { return p }
	if v := f.setting(Progress, req.Extra); v != "" {
		fixed, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fail(fmt.Errorf("%w: setting %s: %w", plugins.ErrBadRequest, Progress, err))
		}
		progress = func(float64) float64 { return fixed }
	}
	texts := make([]string, 0, min(sc.segments, 1024))
	for i := range sc.segments {
		if i == sc.crashAfter {
			crash(sc.crashMode)
		}
		if err := emit(plugins.ProgressEvent(progress(100 * float64(i) / float64(sc.segments)))); err != nil {
			return fail(err)
		}
		if err := sleep(ctx, sc.delay); err != nil {
			return fail(err)
		}
		seg := plugins.Segment{Start: time.Duration(i) * time.Second, End: time.Duration(i+1) * time.Second, Text: fmt.Sprintf("segment %d", i)}
		if err := emit(plugins.SegmentEvent(seg)); err != nil {
			return fail(err)
		}
		texts = append(texts, seg.Text)
	}
	if sc.crashAfter == sc.segments {
		crash(sc.crashMode)
	}
	if err := emit(plugins.ProgressEvent(progress(100))); err != nil {
		return fail(err)
	}
	lang := req.Language
	if lang == "" || lang == "auto" {
		lang = "en"
	}
	if req.VAD { // say what VAD would have run with
		v := req.VADParams
		texts = append(texts, fmt.Sprintf("vad model=%s threshold=%.3g min_speech=%s min_silence=%s max_speech=%s pad=%s",
			filepath.Base(vadModel), v.Threshold, v.MinSpeech, v.MinSilence, v.MaxSpeech, v.SpeechPad))
	}
	return plugins.Result{Language: lang, Duration: time.Duration(sc.segments) * time.Second, Text: strings.Join(texts, " ")}, nil
}

// transcribeScript is the parsed per-call settings.
type transcribeScript struct {
	segments   int
	delay      time.Duration
	crashAfter int // -1: never
	crashMode  string
}

func (f *Fake) transcribeScript(extra map[string]string) (transcribeScript, error) {
	sc := transcribeScript{segments: 3, crashAfter: -1, crashMode: f.setting(CrashMode, extra)}
	var err error
	if v := f.setting(Segments, extra); v != "" {
		if sc.segments, err = strconv.Atoi(v); err != nil || sc.segments < 0 {
			return sc, fmt.Errorf("setting %s=%q: want a count", Segments, v)
		}
	}
	if v := f.setting(SegmentDelay, extra); v != "" {
		if sc.delay, err = time.ParseDuration(v); err != nil {
			return sc, fmt.Errorf("setting %s: %w", SegmentDelay, err)
		}
	}
	if v := f.setting(CrashAfter, extra); v != "" {
		if sc.crashAfter, err = strconv.Atoi(v); err != nil || sc.crashAfter < 0 {
			return sc, fmt.Errorf("setting %s=%q: want a count", CrashAfter, v)
		}
	}
	return sc, nil
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// DefaultMemory is the report Load returns when the memory setting is unset.
const DefaultMemory = "model=77000000,kv_self=3145728,kv_cross=9437184,kv_pad=0,compute.conv=11000000,compute.encode=21000000,compute.cross=4000000,compute.decode=97000000"

// ParseMemory reads a memory report written as comma-separated key=bytes
// pairs: model, kv_self, kv_cross, kv_pad, total and compute.NAME. Empty
// means DefaultMemory.
func ParseMemory(spec string) (plugins.MemoryReport, error) {
	if spec == "" {
		spec = DefaultMemory
	}
	rep := plugins.MemoryReport{ComputeBytes: map[string]int64{}}
	for item := range strings.SplitSeq(spec, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		n, err := strconv.ParseInt(val, 10, 64)
		if !ok || err != nil || n < 0 {
			return plugins.MemoryReport{}, fmt.Errorf("parse memory %q: item %q: want key=bytes", spec, item)
		}
		if name, ok := strings.CutPrefix(key, "compute."); ok && name != "" {
			rep.ComputeBytes[name] = n
			continue
		}
		field, ok := map[string]*int64{
			"model": &rep.ModelBytes, "kv_self": &rep.KVSelfBytes, "kv_cross": &rep.KVCrossBytes,
			"kv_pad": &rep.KVPadBytes, "total": &rep.TotalBytes,
		}[key]
		if !ok {
			return plugins.MemoryReport{}, fmt.Errorf("parse memory %q: unknown key %q", spec, key)
		}
		*field = n
	}
	return rep, nil
}

// Sentinel returns the plugins sentinel error a script names: model_not_found,
// bad_model, bad_audio, bad_request, oom, not_loaded, unavailable; any other
// text becomes a plain error with that text.
func Sentinel(name string) error {
	switch name {
	case "model_not_found":
		return plugins.ErrModelNotFound
	case "bad_model":
		return plugins.ErrBadModel
	case "bad_audio":
		return plugins.ErrBadAudio
	case "bad_request":
		return plugins.ErrBadRequest
	case "oom":
		return plugins.ErrOutOfMemory
	case "not_loaded":
		return plugins.ErrNotLoaded
	case "unavailable":
		return plugins.ErrUnavailable
	}
	return fmt.Errorf("scripted failure: %s", name)
}

// leaseTooSmall is the scripted OOM of a lease under oom_below bytes.
func (f *Fake) leaseTooSmall(extra map[string]string) error {
	below := f.setting(OOMBelow, extra)
	if below == "" {
		return nil
	}
	need, err := strconv.ParseInt(below, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q: %w", plugins.ErrBadRequest, OOMBelow, below, err)
	}
	v, _ := f.lookupEnv("WSCHED_MEMORY_BYTES")
	if lease, err := strconv.ParseInt(v, 10, 64); err != nil || lease < need {
		return fmt.Errorf("%w: lease %q bytes, need %d", plugins.ErrOutOfMemory, v, need)
	}
	return nil
}
