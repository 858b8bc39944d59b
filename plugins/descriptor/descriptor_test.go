package descriptor

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/wsched/wsched/internal/confval"
)

var sample = Descriptor{
	Name: "demo", Profile: "p", Devices: []string{DeviceCPU},
	Options: []Option{
		{Name: "beam", Type: TypeInt, Default: "2", Help: "beam width"},
		{Name: "temp", Type: TypeFloat},
		{Name: "fast", Type: TypeBool, Default: "true"},
		{Name: "mode", Type: TypeEnum, Values: []string{"a", "b"}},
		{Name: "wait", Type: TypeDuration},
		{Name: "cmd", Type: TypeList, Required: true, Help: "the command"},
		{Name: "env", Type: TypeTable, Reserved: []string{"PORT", "WSCHED_*"}},
		{Name: "route", Type: TypeRoute},
	},
}

// TestCheckOptions: decoded TOML values become wire strings by type; a
// wrong name, type or value, or a missing required option, is a KeyError
// naming the key.
func TestCheckOptions(t *testing.T) {
	got, err := sample.Check("models.model#0", map[string]any{
		"beam": int64(4), "temp": 0.5, "fast": false, "mode": "b", "wait": "3s", "cmd": []any{"python3", "x.py"},
		"env": map[string]any{"A": "1"}, "route": "/asr",
	})
	want := map[string]string{"beam": "4", "temp": "0.5", "fast": "false", "mode": "b", "wait": "3s", "cmd": `["python3","x.py"]`,
		"env": `{"A":"1"}`, "route": "/asr"}
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("Check = %v, %v; want %v", got, err, want)
	}
	if r := sample.Resolve(map[string]string{"beam": "4"}); !maps.Equal(r, map[string]string{"beam": "4", "fast": "true"}) {
		t.Errorf("Resolve = %v", r)
	}
	cmd := []any{"x"}
	for _, tt := range []struct {
		opts map[string]any
		key  string
		msg  string
	}{
		{map[string]any{"cmd": cmd, "nope": 1}, "models.model#0.options.nope", `backend "demo" has no option "nope" (it has: beam, temp`},
		{map[string]any{"cmd": cmd, "beam": 1.5}, "models.model#0.options.beam", "want a whole number"},
		{map[string]any{"cmd": cmd, "beam": "4"}, "models.model#0.options.beam", "want a whole number"},
		{map[string]any{"cmd": cmd, "fast": "yes"}, "models.model#0.options.fast", "want true or false"},
		{map[string]any{"cmd": cmd, "mode": "c"}, "models.model#0.options.mode", `"c" is not allowed: want one of a, b`},
		{map[string]any{"cmd": cmd, "wait": "soon"}, "models.model#0.options.wait", "want a duration above 0"},
		{map[string]any{"cmd": cmd, "env": map[string]any{"WSCHED_X": "1"}}, "models.model#0.options.env", `"WSCHED_X": not allowed`},
		{map[string]any{"cmd": cmd, "env": map[string]any{"PORT": "1"}}, "models.model#0.options.env", `"PORT": not allowed`},
		{map[string]any{"cmd": cmd, "route": "asr"}, "models.model#0.options.route", "want a route starting with /"},
		{map[string]any{"cmd": []any{""}}, "models.model#0.options.cmd", "is empty: the command"},
		{map[string]any{}, "models.model#0.options.cmd", `is required for backend "demo"`},
	} {
		_, err := sample.Check("models.model#0", tt.opts)
		var ke *confval.KeyError
		if !errors.As(err, &ke) || ke.Key != tt.key || !strings.Contains(ke.Msg, tt.msg) {
			t.Errorf("Check(%v) = %v; want %s: …%s…", tt.opts, err, tt.key, tt.msg)
		}
	}
}

// TestLayouts: a file layout frames the model name; a directory layout
// picks one file per requirement, in pattern order, or does not match.
func TestLayouts(t *testing.T) {
	f := Layout{Kind: LayoutFile, Prefix: "ggml-", Suffix: ".bin"}
	for file, want := range map[string]string{"ggml-tiny.bin": "tiny", "ggml-.bin": "", "tiny.bin": "", "ggml-tiny.gguf": ""} {
		if got, ok := f.Match(file); got != want || ok != (want != "") {
			t.Errorf("Match(%s) = %q %v, want %q", file, got, ok, want)
		}
	}
	d := Layout{Kind: LayoutDir, Requires: [][]string{{"tokens.txt"}, {"model.onnx", "model.int8.onnx"}}}
	if got, ok := d.Files([]string{"model.int8.onnx", "model.onnx", "tokens.txt"}); !ok || strings.Join(got, ",") != "tokens.txt,model.onnx" {
		t.Errorf("Files = %v %v", got, ok)
	}
	if _, ok := d.Files([]string{"model.onnx"}); ok {
		t.Error("a directory without tokens.txt matches")
	}
	if _, ok := (Layout{Kind: LayoutDir}).Files([]string{"x"}); ok {
		t.Error("a directory layout without requirements matches")
	}
}

// TestSet: lookup by name (the error names the known backends), the first
// of a name wins, CPU-only builds are told apart.
func TestSet(t *testing.T) {
	s := NewSet(sample, Descriptor{Name: "demo", Profile: "other"}, Descriptor{Name: "gpu", Devices: []string{DeviceCPU, DeviceCUDA}})
	if d, err := s.Lookup("demo"); err != nil || d.Profile != "p" || !d.CPUOnly() {
		t.Errorf("Lookup(demo) = %+v, %v", d, err)
	}
	if d, _ := s.Lookup("gpu"); d.CPUOnly() {
		t.Error("a CUDA build is CPU-only")
	}
	if _, err := s.Lookup("x"); !errors.Is(err, ErrUnknownBackend) || !strings.Contains(err.Error(), "known: demo, gpu") {
		t.Errorf("Lookup(x) = %v", err)
	}
	if (Descriptor{Name: "old"}).CPUOnly() {
		t.Error("a backend that names no devices is CPU-only")
	}
}
