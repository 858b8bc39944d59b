package models

import (
	"errors"
	"strings"
	"testing"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/confval"
	"github.com/wsched/wsched/plugins/descriptor"
)

// TestCheckEntries: entries are checked against their backend's
// descriptor, the errors naming the key as the entry wrote it (a top-level
// shorthand, or the options table); entries of backends not discovered are
// left to the registry.
func TestCheckEntries(t *testing.T) {
	const exec = "[[models.model]]\nname = \"sv\"\nbackend = \"exec\"\ncommand = [\"python3\", \"main.py\"]\ndir = \"/srv/sv\"\n"
	const whisper = "[[models.model]]\nname = \"w\"\nbackend = \"whisper.cpp\"\npath = \"/m.bin\"\n"
	good := exec + "memory = \"3GiB\"\nhealth = \"/health\"\nprotocol = \"multipart\"\npath = \"/api/v1/asr\"\nfield = \"files\"\ntext_json_path = \"result.0.text\"\nenv = { MODEL_DIR = \"x\" }\nstart_timeout = \"1m\"\n"
	for _, ok := range []string{good, whisper + "options = { flash_attention = false }\n",
		"[[models.model]]\nname = \"sv\"\nbackend = \"sherpa-onnx\"\npath = \"/m/sv\"\nlanguage = \"yue\"\nitn = false\n",
		"[[models.model]]\nname = \"x\"\nbackend = \"not-installed\"\npath = \"/m/x\"\noptions = { anything = 1 }\n"} {
		if err := check(t, ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, tt := range []struct{ name, toml, key, msg string }{
		{"no memory", exec, "models.model#0.memory", `is required for backend "exec"`},
		{"no command", "[[models.model]]\nname = \"sv\"\nbackend = \"exec\"\ndir = \"/srv\"\nmemory = \"1GiB\"\n", "models.model#0.command", `is required for backend "exec"`},
		{"no dir", "[[models.model]]\nname = \"sv\"\nbackend = \"exec\"\ncommand = [\"x\"]\nmemory = \"1GiB\"\n", "models.model#0.dir", "is empty"},
		{"protocol", exec + "memory = \"1GiB\"\nprotocol = \"grpc\"\n", "models.model#0.protocol", `"grpc" is not allowed: want one of openai, multipart`},
		{"route", exec + "memory = \"1GiB\"\nhealth = \"health\"\n", "models.model#0.health", `"health" is not allowed`},
		{"owned env", exec + "memory = \"1GiB\"\nenv = { SENSEVOICE_DEVICE = \"cuda:3\" }\n", "models.model#0.env", `"SENSEVOICE_DEVICE": not allowed`},
		{"vad on exec", exec + "memory = \"1GiB\"\nvad = true\n", "models.model#0.vad", `backend "exec" cannot do voice activity detection`},
		{"command elsewhere", whisper + "command = [\"x\"]\n", "models.model#0.command", `backend "whisper.cpp" has no option "command"`},
		{"vad without model", whisper + "vad = true\n", "models.model#0.vad", "is true but vad_model is empty"},
		{"language elsewhere", whisper + "language = \"en\"\n", "models.model#0.language", `backend "whisper.cpp" has no option "language"`},
		{"option type", whisper + "options = { flash_attention = \"yes\" }\n", "models.model#0.options.flash_attention", "want true or false"},
		{"sherpa language", "[[models.model]]\nname = \"sv\"\nbackend = \"sherpa-onnx\"\npath = \"/m/sv\"\nlanguage = \"de\"\n", "models.model#0.language", "want one of auto, zh"},
	} {
		err := check(t, tt.toml)
		var ke *confval.KeyError
		if !errors.As(err, &ke) || ke.Key != tt.key || !strings.Contains(ke.Msg, tt.msg) {
			t.Errorf("%s: %v, want %s: …%s…", tt.name, err, tt.key, tt.msg)
		}
	}
}

func check(t *testing.T, toml string) error {
	t.Helper()
	cfg, err := config.Parse([]byte(toml), "t.toml")
	if err != nil {
		t.Fatalf("%s: %v", toml, err)
	}
	return Check(cfg.Models, testBackends)
}

// TestEntryOptionsReachTheModel: a registered model carries its entry's
// checked options; one its backend refuses makes it unavailable, saying
// why; an app backend's model is its dir, its path an option.
func TestEntryOptionsReachTheModel(t *testing.T) {
	dir := t.TempDir()
	reg, err := Load(t.Context(), config.Models{Entries: []config.Model{
		{Name: "app", Backend: execName, Dir: dir, Path: "/asr", Command: []string{"x"}, Memory: 1 << 30},
		{Name: "bad", Backend: execName, Dir: dir, Command: []string{"x"}, Memory: 1 << 30, Options: map[string]any{"protocol": "grpc"}},
	}}, testBackends)
	if err != nil {
		t.Fatal(err)
	}
	m, err := reg.Lookup("app")
	if err != nil || m.Path != dir || m.Options["path"] != "/asr" || m.Options["command"] != `["x"]` {
		t.Errorf("app: %+v %v", m, err)
	}
	if m, err := reg.Lookup("bad"); !errors.Is(err, ErrUnavailable) || !strings.Contains(m.Problem, "options.protocol") {
		t.Errorf("bad: %q %v", m.Problem, err)
	}
	if _, err := (Model{Name: "app", Descriptor: descriptor.Descriptor{Name: "x"}}).EstimateRequest(); !errors.Is(err, ErrNoProfile) {
		t.Errorf("a backend without a profile: %v", err)
	}
}
