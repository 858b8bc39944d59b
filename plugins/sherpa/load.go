package sherpa

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	so "github.com/k2-fsa/sherpa-onnx-go-linux"

	"github.com/wsched/wsched/estimator/onnx"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/sherpa/modeldir"
)

// ExtraMaxStreams in a LoadRequest's Extra is the instance's max_streams:
// how many Transcribe calls run at once (default Options.MaxStreams).
const ExtraMaxStreams = plugins.ExtraMaxStreams

// SenseVoice languages sherpa-onnx knows ("" and "auto" detect).
var senseVoiceLanguages = map[string]bool{"auto": true, "zh": true, "en": true, "ja": true, "ko": true, "yue": true}

// model is a loaded recognizer and what it was loaded with.
type model struct {
	rec      *so.OfflineRecognizer
	dir      modeldir.Dir
	device   string // "cpu" or "cuda:N"
	provider string // ONNX Runtime provider: "cpu" or "cuda"
	threads  int
	language string // SenseVoice: auto, zh, en, ja, ko, yue
	itn      bool   // SenseVoice: inverse text normalization
	vadModel string // silero VAD model; "" when none
	report   plugins.MemoryReport
	// maxStreams is how many calls run at once; batch decodes their pieces.
	maxStreams int
	batch      *batcher
}

func (m *model) free() {
	m.batch.stop()
	so.DeleteOfflineRecognizer(m.rec)
}

// Load opens the model directory (see modeldir.OpenDir), checks it the way
// sherpa-onnx would (it exits the process on missing metadata), and creates
// the offline recognizer. Device "cpu" uses the CPU provider; "cuda:N", ""
// or "auto" the CUDA provider when ONNX Runtime has one, else the CPU with a
// warning. Extra: "language" (SenseVoice: auto, zh, en, ja, ko, yue;
// Whisper: a code, "" detects) and "itn" (SenseVoice inverse text
// normalization, default true). VADModelPath is a silero VAD ONNX model:
// Transcribe then cuts the audio at pauses instead of fixed windows.
//
// The memory report is the process's resident set growth while the
// recognizer was created (ONNX Runtime's own allocations and the weights it
// keeps), in ModelBytes; sherpa-onnx reports nothing itself.
func (b *Backend) Load(ctx context.Context, req plugins.LoadRequest) (plugins.MemoryReport, error) {
	fail := func(err error) (plugins.MemoryReport, error) {
		return plugins.MemoryReport{}, fmt.Errorf("sherpa load %s: %w", req.ModelPath, err)
	}
	m, err := b.prepare(req)
	if err != nil {
		return fail(err)
	}
	if err := b.gate.Acquire(ctx, true); err != nil {
		return fail(err)
	}
	defer b.gate.Release(true)
	b.unloadLocked()
	before := residentBytes()
	m.rec = so.NewOfflineRecognizer(m.config())
	if m.rec == nil {
		return fail(fmt.Errorf("%w: sherpa-onnx refused %s (see the backend's log)", plugins.ErrBadModel, m.dir.Path))
	}
	grown := max(residentBytes()-before, 0)
	m.report = plugins.MemoryReport{ModelBytes: grown, TotalBytes: grown}
	m.batch = newBatcher(m.rec, m.dir.Kind, m.maxStreams, b.opts.BatchWindow)
	b.gate.SetLimit(m.maxStreams)
	if err := ctx.Err(); err != nil { // the host gave up waiting: do not keep it
		m.free()
		return fail(err)
	}
	b.mu.Lock()
	b.model = m
	b.mu.Unlock()
	b.log.Info("loaded model", "model", m.dir.Path, "kind", m.dir.Kind, "device", m.device, "provider", m.provider,
		"initializer_bytes", m.dir.Bytes(), "resident_growth_bytes", grown)
	return m.report, nil
}

// prepare checks the request and the model directory.
func (b *Backend) prepare(req plugins.LoadRequest) (*model, error) {
	dev, provider, err := b.placement(req.Device)
	if err != nil {
		return nil, err
	}
	if req.Threads < 0 {
		return nil, fmt.Errorf("%w: threads %d", plugins.ErrBadRequest, req.Threads)
	}
	dir, err := modeldir.OpenDir(req.ModelPath)
	if err != nil {
		return nil, err
	}
	m := &model{dir: dir, device: dev, provider: provider, threads: req.Threads, itn: true, vadModel: req.VADModelPath, maxStreams: b.opts.MaxStreams}
	if v := req.Extra[ExtraMaxStreams]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: %s=%q: want a positive count", plugins.ErrBadRequest, ExtraMaxStreams, v)
		}
		m.maxStreams = n
	}
	if m.threads == 0 {
		m.threads = min(runtime.NumCPU(), 4)
	}
	m.language = strings.ToLower(strings.TrimSpace(req.Extra["language"]))
	if dir.Kind == modeldir.SenseVoice {
		if m.language == "" {
			m.language = "auto"
		}
		if !senseVoiceLanguages[m.language] {
			return nil, fmt.Errorf("%w: SenseVoice language %q (want auto, zh, en, ja, ko or yue)", plugins.ErrBadRequest, m.language)
		}
	}
	if err := checkWhisperLanguage(dir, m.language); err != nil {
		return nil, err
	}
	if v, ok := req.Extra["itn"]; ok {
		if m.itn, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("%w: itn %q: %w", plugins.ErrBadRequest, v, err)
		}
	}
	if m.vadModel != "" {
		if err := checkVAD(m.vadModel); err != nil {
			return nil, fmt.Errorf("VAD model %s: %w", m.vadModel, err)
		}
	}
	return m, nil
}

// checkWhisperLanguage refuses a language a multilingual Whisper model does
// not list (sherpa-onnx exits the process on one).
func checkWhisperLanguage(dir modeldir.Dir, lang string) error {
	meta := dir.Files[0].Metadata
	if dir.Kind != modeldir.Whisper || lang == "" || meta["is_multilingual"] == "0" {
		return nil
	}
	codes := strings.Split(meta["all_language_codes"], ",")
	if !slices.Contains(codes, lang) {
		return fmt.Errorf("%w: Whisper language %q: the model knows %s", plugins.ErrBadRequest, lang, meta["all_language_codes"])
	}
	return nil
}

// checkVAD refuses what sherpa-onnx's silero VAD would exit the process
// on: a model without silero v4's (input, sr, h, c → output, hn, cn) or
// v5's (input, state, sr → output, stateN) inputs and outputs.
func checkVAD(path string) error {
	if !fileExists(path) {
		return fmt.Errorf("%w: no such file", plugins.ErrModelNotFound)
	}
	m, err := onnx.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: %w", plugins.ErrBadModel, err)
	}
	in, out := strings.Join(m.Inputs, ","), strings.Join(m.Outputs, ",")
	if (in == "input,sr,h,c" && out == "output,hn,cn") || (in == "input,state,sr" && out == "output,stateN") {
		return nil
	}
	return fmt.Errorf("%w: inputs (%s) and outputs (%s) are not silero VAD v4's or v5's", plugins.ErrBadModel, in, out)
}

// config is the recognizer configuration for m.
func (m *model) config() *so.OfflineRecognizerConfig {
	c := &so.OfflineRecognizerConfig{FeatConfig: so.FeatureConfig{SampleRate: 16000, FeatureDim: 80}, DecodingMethod: "greedy_search"}
	mc := &c.ModelConfig
	mc.Tokens, mc.NumThreads, mc.Provider = filepath.Join(m.dir.Path, m.dir.Tokens), m.threads, m.provider
	switch m.dir.Kind {
	case modeldir.SenseVoice:
		mc.SenseVoice = so.OfflineSenseVoiceModelConfig{Model: filepath.Join(m.dir.Path, m.dir.Model), Language: m.language}
		if m.itn {
			mc.SenseVoice.UseInverseTextNormalization = 1
		}
	case modeldir.Paraformer:
		mc.Paraformer.Model = filepath.Join(m.dir.Path, m.dir.Model)
	case modeldir.Whisper:
		mc.Whisper = so.OfflineWhisperModelConfig{Encoder: filepath.Join(m.dir.Path, m.dir.Encoder),
			Decoder: filepath.Join(m.dir.Path, m.dir.Decoder), Language: m.language, Task: "transcribe", TailPaddings: -1}
	}
	return c
}

// placement turns the request's device into the device reported and the
// ONNX Runtime provider.
func (b *Backend) placement(dev string) (string, string, error) {
	spec, err := device.Parse(dev)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", plugins.ErrBadRequest, err)
	}
	switch spec.Kind {
	case device.CPU:
		return "cpu", "cpu", nil
	case device.Auto, device.Index:
		if b.cuda == "" {
			b.log.Warn("GPU requested but this ONNX Runtime has no CUDA provider (no libonnxruntime_providers_cuda.so next to libonnxruntime.so): loading on the CPU", "device", dev)
			return "cpu", "cpu", nil
		}
		if spec.Kind == device.Auto {
			return "cuda:0", "cuda", nil
		}
		if spec.Index != 0 {
			// sherpa-onnx's C API always uses device 0: under a lease the
			// process sees only its GPU, as cuda:0.
			return "", "", fmt.Errorf("%w: device cuda:%d: sherpa-onnx uses the first visible GPU; pin with CUDA_VISIBLE_DEVICES", plugins.ErrBadRequest, spec.Index)
		}
		return "cuda:0", "cuda", nil
	}
	return "", "", fmt.Errorf("%w: device %q: name the GPU as the backend process sees it (cuda:0)", plugins.ErrBadRequest, dev)
}
