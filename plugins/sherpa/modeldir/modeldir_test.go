package modeldir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/estimator/onnx/onnxtest"
	"github.com/wsched/wsched/plugins"
)

// write puts an ONNX model with metadata meta (and, with ext, weights in
// an external file) at dir/name, and a tokens.txt beside it.
func write(t *testing.T, dir, name string, meta [][2]string, ext bool) {
	t.Helper()
	w := onnxtest.Tensor{Name: "w", DataType: onnxtest.Float, Dims: []int64{4, 4}, Raw: onnxtest.Floats(make([]float32, 16))}
	if ext {
		w = onnxtest.Tensor{Name: "w", DataType: onnxtest.Float, Dims: []int64{4, 4}, External: "w.bin", ExternalLength: 64}
	}
	m := onnxtest.Model{IRVersion: 8, Opset: 13, Metadata: meta, Graph: onnxtest.Graph{
		Nodes:        []onnxtest.Node{{Op: "MatMul", Inputs: []string{"x", "w"}, Output: []string{"y"}}},
		Initializers: []onnxtest.Tensor{w},
		Inputs:       []onnxtest.Value{{Name: "x", ElemType: onnxtest.Float, Dims: []any{"n", 4}}},
		Outputs:      []onnxtest.Value{{Name: "y", ElemType: onnxtest.Float, Dims: []any{"n", 4}}},
	}}
	if err := os.WriteFile(filepath.Join(dir, name), m.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens.txt"), []byte(onnxtest.Tokens(30)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func pairs(keys ...string) [][2]string {
	var out [][2]string
	for _, k := range keys {
		out = append(out, [2]string{k, "1"})
	}
	return out
}

func TestOpenDir(t *testing.T) {
	sv := t.TempDir()
	if _, err := onnxtest.WriteSenseVoice(sv, onnxtest.SenseVoiceOptions{Int8: true}); err != nil {
		t.Fatal(err)
	}
	para := t.TempDir()
	write(t, para, "model.onnx", append(pairs(required[Paraformer]...), [2]string{"model_type", "paraformer"}), false)
	write(t, para, "model.int8.onnx", nil, false) // model.onnx wins
	whisper := t.TempDir()
	write(t, whisper, "tiny.en-encoder.onnx", pairs(append(required[Whisper], "all_language_tokens", "all_language_codes")...), false)
	write(t, whisper, "tiny.en-decoder.onnx", nil, false)
	write(t, whisper, "tiny.en-decoder.int8.onnx", nil, false)
	for _, tt := range []struct {
		path  string
		kind  Kind
		files string
	}{
		{sv, SenseVoice, "model.int8.onnx"},
		{filepath.Join(sv, "model.int8.onnx"), SenseVoice, "model.int8.onnx"},
		{para, Paraformer, "model.onnx"},
		{whisper, Whisper, "tiny.en-encoder.onnx tiny.en-decoder.onnx"},
	} {
		d, err := OpenDir(tt.path)
		if err != nil {
			t.Fatalf("%s: %v", tt.path, err)
		}
		files := strings.TrimSpace(d.Model + " " + d.Encoder + " " + d.Decoder)
		if d.Kind != tt.kind || files != tt.files || d.Tokens != "tokens.txt" || d.Bytes() <= 0 || !IsModelDir(d.Path) {
			t.Errorf("%s: %s %q, %d bytes", tt.path, d.Kind, files, d.Bytes())
		}
	}
}

func TestOpenDirRefuses(t *testing.T) {
	noMeta := t.TempDir()
	write(t, noMeta, "model.onnx", nil, false)
	whisper := t.TempDir()
	write(t, whisper, "encoder.onnx", pairs("n_mels"), false)
	write(t, whisper, "decoder.onnx", nil, false)
	multi := t.TempDir() // is_multilingual 1 without the language lists
	write(t, multi, "encoder.onnx", pairs(required[Whisper]...), false)
	write(t, multi, "decoder.onnx", nil, false)
	ext := t.TempDir()
	write(t, ext, "model.onnx", pairs(required[Paraformer]...), true)
	empty := t.TempDir()
	for _, tt := range []struct {
		path string
		want error
		says string
	}{
		{filepath.Join(empty, "missing"), plugins.ErrModelNotFound, "no such"},
		{empty, plugins.ErrBadModel, "tokens.txt"},
		{noMeta, plugins.ErrBadModel, "neither SenseVoice nor Paraformer"},
		{whisper, plugins.ErrBadModel, "n_text_layer"},
		{multi, plugins.ErrBadModel, "all_language_tokens, all_language_codes"},
		{ext, plugins.ErrBadModel, "external data (w.bin)"},
	} {
		_, err := OpenDir(tt.path)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: %v, want %v saying %q", tt.path, err, tt.want, tt.says)
		}
	}
	if IsModelDir(empty) {
		t.Error("an empty directory is a model directory")
	}
}
