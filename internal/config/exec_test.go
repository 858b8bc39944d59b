package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestModelEntryChecks: what an entry says whatever its backend is checked
// at load (absolute paths, VAD values, an option set twice); what its
// backend reads is checked against the backend's descriptor (models.Check).
func TestModelEntryChecks(t *testing.T) {
	const exec = "[[models.model]]\nname = \"sv\"\nbackend = \"exec\"\ncommand = [\"python3\", \"main.py\"]\ndir = \"/srv/sv\"\n"
	good := exec + "memory = \"3GiB\"\nhealth = \"/health\"\nprotocol = \"multipart\"\npath = \"/api/v1/asr\"\nfield = \"files\"\ntext_json_path = \"result.0.text\"\nenv = { MODEL_DIR = \"x\" }\nstart_timeout = \"1m\"\n"
	cfg, err := Parse([]byte(good), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	sv, err := Parse([]byte("[[models.model]]\nname = \"sv\"\nbackend = \"sherpa-onnx\"\npath = \"/m/sv\"\nlanguage = \"yue\"\nitn = false\n"), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if e := sv.Models.Entries[0]; e.Language != "yue" || e.ITN == nil || *e.ITN {
		t.Errorf("sherpa entry %+v", e)
	}
	if e := cfg.Models.Entries[0]; e.Dir != "/srv/sv" || e.Env["MODEL_DIR"] != "x" || e.TextJSONPath != "result.0.text" || e.StartTimeout.D().Minutes() != 1 {
		t.Errorf("entry %+v", e)
	}
	for _, tt := range []struct{ name, toml, want string }{
		{"relative dir", strings.Replace(exec, "/srv/sv", "srv", 1) + "memory = \"1GiB\"\n", `models.model.dir: "srv" is not allowed`},
		{"relative path", "[[models.model]]\nname = \"w\"\nbackend = \"whisper.cpp\"\npath = \"m.bin\"\n", `models.model.path: "m.bin" is not allowed`},
		{"vad threshold", "[[models.model]]\nname = \"w\"\nbackend = \"whisper.cpp\"\npath = \"/m.bin\"\nvad_threshold = 2.0\n", "models.model.vad_threshold: 2 is not allowed"},
		{"option twice", exec + "options = { command = [\"y\"] }\n", "models.model.options.command: is also set as models.model#0.command"},
	} {
		_, err := Parse([]byte(tt.toml), "t.toml")
		if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestModelSettings: an entry's options table and its top-level backend
// keys make one set of options; what they mean is the backend's business
// (models.Check).
func TestModelSettings(t *testing.T) {
	cfg, err := Parse([]byte("[[models.model]]\nname = \"sv\"\nbackend = \"sherpa-onnx\"\npath = \"/m/sv\"\nlanguage = \"yue\"\noptions = { itn = false, beam = 4, tags = [\"a\"] }\n"), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Models.Entries[0].Settings()
	want := map[string]any{"language": "yue", "itn": false, "beam": int64(4), "tags": []any{"a"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("settings %#v, want %#v", got, want)
	}
}
