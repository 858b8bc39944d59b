// Package modeldir reads a sherpa-onnx model directory without loading it:
// which files the recognizer needs, which kind of recognizer (SenseVoice,
// Paraformer, Whisper) they make, and their ONNX headers (initializer
// bytes for the estimator, metadata checked before sherpa-onnx sees it).
// It is pure Go, so the daemon's model registry can use it without linking
// sherpa-onnx.
package modeldir

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wsched/wsched/estimator/onnx"
	"github.com/wsched/wsched/plugins"
)

// Kind is the recognizer a model directory holds.
type Kind string

// Kinds.
const (
	SenseVoice Kind = "sense_voice"
	Paraformer Kind = "paraformer"
	Whisper    Kind = "whisper"
)

// Dir is a model directory as the backend loads it.
type Dir struct {
	Path   string
	Kind   Kind
	Model  string // SenseVoice, Paraformer: model.onnx or model.int8.onnx
	Tokens string
	// Encoder and Decoder: Whisper (*encoder*.onnx, *decoder*.onnx).
	Encoder, Decoder string
	// Files are the ONNX files the recognizer loads, as the estimator reads
	// them (initializer bytes, metadata).
	Files []*onnx.Model
}

// Bytes is the initializer bytes of all its ONNX files.
func (d Dir) Bytes() int64 {
	var n int64
	for _, f := range d.Files {
		n += f.InitializerBytes
	}
	return n
}

// required lists the metadata sherpa-onnx v1.12.0 reads without a default:
// it exits the process when one is missing, so OpenDir checks them first.
var required = map[Kind][]string{
	SenseVoice: {"vocab_size", "lfr_window_size", "lfr_window_shift", "normalize_samples", "with_itn", "without_itn",
		"lang_auto", "lang_zh", "lang_en", "lang_ja", "lang_ko", "lang_yue", "neg_mean", "inv_stddev"},
	Paraformer: {"vocab_size", "lfr_window_size", "lfr_window_shift", "neg_mean", "inv_stddev"},
	Whisper: {"n_mels", "n_text_layer", "n_text_ctx", "n_text_state", "n_vocab", "sot", "eot", "blank_id",
		"translate", "transcribe", "is_multilingual", "no_timestamps", "no_speech", "sot_sequence"},
}

// OpenDir resolves a model path (a directory, or a file in one) to its
// files, reads their ONNX headers and tells SenseVoice, Paraformer and
// Whisper apart: model.onnx (or model.int8.onnx) with SenseVoice's language
// metadata is SenseVoice, with LFR metadata only Paraformer; *encoder*.onnx
// next to *decoder*.onnx is Whisper. A missing path is ErrModelNotFound; a
// directory that is none of these, or misses metadata sherpa-onnx needs,
// ErrBadModel.
func OpenDir(path string) (Dir, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Dir{}, fmt.Errorf("%w: %w", plugins.ErrModelNotFound, err)
	}
	dir := path
	if !st.IsDir() {
		dir = filepath.Dir(path)
	}
	names, err := listDir(dir)
	if err != nil {
		return Dir{}, fmt.Errorf("%w: %w", plugins.ErrModelNotFound, err)
	}
	d := Dir{Path: dir}
	d.Tokens = pick(names, "tokens.txt", "*tokens.txt")
	switch model := pick(names, "model.onnx", "model.int8.onnx"); {
	case !st.IsDir() && strings.HasSuffix(path, ".onnx") && !strings.Contains(filepath.Base(path), "coder"):
		d.Model = filepath.Base(path)
	case model != "":
		d.Model = model
	default:
		d.Encoder = pick(names, "encoder.onnx", "*encoder.onnx", "encoder.int8.onnx", "*encoder.int8.onnx")
		d.Decoder = pick(names, "decoder.onnx", "*decoder.onnx", "decoder.int8.onnx", "*decoder.int8.onnx")
	}
	if err := d.read(); err != nil {
		return Dir{}, err
	}
	return d, nil
}

// read reads the ONNX files, sets Kind and checks the metadata.
func (d *Dir) read() error {
	if d.Tokens == "" {
		return fmt.Errorf("%w: %s has no tokens.txt", plugins.ErrBadModel, d.Path)
	}
	var files []string
	switch {
	case d.Model != "":
		files = []string{d.Model}
	case d.Encoder != "" && d.Decoder != "":
		files, d.Kind = []string{d.Encoder, d.Decoder}, Whisper
	default:
		return fmt.Errorf("%w: %s has no model.onnx, model.int8.onnx or Whisper encoder/decoder pair", plugins.ErrBadModel, d.Path)
	}
	for _, name := range files {
		m, err := onnx.ReadFile(filepath.Join(d.Path, name))
		if err != nil {
			return fmt.Errorf("%w: %w", plugins.ErrBadModel, err)
		}
		if len(m.ExternalFiles) > 0 {
			// sherpa-onnx hands ONNX Runtime the file's bytes, so
			// external data cannot be found.
			return fmt.Errorf("%w: %s keeps weights in external data (%s); sherpa-onnx loads single-file models only", plugins.ErrBadModel, name, strings.Join(m.ExternalFiles, ", "))
		}
		d.Files = append(d.Files, m)
	}
	meta := d.Files[0].Metadata
	if d.Kind == "" {
		d.Kind = kindOf(meta)
	}
	if d.Kind == "" {
		return fmt.Errorf("%w: %s: neither SenseVoice nor Paraformer metadata (model_type %q)", plugins.ErrBadModel, d.Model, meta["model_type"])
	}
	var missing []string
	keys := required[d.Kind]
	if d.Kind == Whisper && meta["is_multilingual"] != "0" {
		keys = append(keys[:len(keys):len(keys)], "all_language_tokens", "all_language_codes")
	}
	for _, k := range keys {
		if meta[k] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s model %s lacks metadata sherpa-onnx needs: %s", plugins.ErrBadModel, d.Kind, files[0], strings.Join(missing, ", "))
	}
	return nil
}

func kindOf(meta map[string]string) Kind {
	switch {
	case meta["lang_auto"] != "" || meta["with_itn"] != "" || strings.Contains(meta["model_type"], "sense_voice"):
		return SenseVoice
	case strings.Contains(meta["model_type"], "paraformer") || (meta["lfr_window_size"] != "" && meta["neg_mean"] != ""):
		return Paraformer
	}
	return ""
}

func listDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0 {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// pick returns the first name matching one of the patterns, tried in order.
func pick(names []string, patterns ...string) string {
	for _, p := range patterns {
		for _, n := range names {
			if ok, _ := filepath.Match(p, n); ok && !(strings.HasSuffix(p, "coder.onnx") && strings.Contains(n, ".int8.")) {
				return n
			}
		}
	}
	return ""
}

// IsModelDir reports whether dir looks like a sherpa-onnx model directory
// (tokens.txt plus model.onnx, model.int8.onnx or a Whisper encoder and
// decoder), without reading the models.
func IsModelDir(dir string) bool {
	names, err := listDir(dir)
	if err != nil || pick(names, "tokens.txt", "*tokens.txt") == "" {
		return false
	}
	return pick(names, "model.onnx", "model.int8.onnx") != "" ||
		(pick(names, "*encoder.onnx", "*encoder.int8.onnx") != "" && pick(names, "*decoder.onnx", "*decoder.int8.onnx") != "")
}
