package config

import (
	"errors"
	"strings"
	"testing"
)

// TestModelEntryChecks: exec entries need command, dir and memory; keys of
// one backend are refused on another; VAD settings are checked.
func TestModelEntryChecks(t *testing.T) {
	const exec = "[[models.model]]\nname = \"sv\"\nbackend = \"exec\"\ncommand = [\"python3\", \"main.py\"]\ndir = \"/srv/sv\"\n"
	good := exec + "memory = \"3GiB\"\nhealth = \"/health\"\nprotocol = \"multipart\"\npath = \"/api/v1/asr\"\nfield = \"files\"\ntext_json_path = \"result.0.text\"\nenv = { MODEL_DIR = \"x\" }\nstart_timeout = \"1m\"\n"
	cfg, err := Parse([]byte(good), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if e := cfg.Models.Entries[0]; e.Dir != "/srv/sv" || e.Env["MODEL_DIR"] != "x" || e.TextJSONPath != "result.0.text" || e.StartTimeout.D().Minutes() != 1 {
		t.Errorf("entry %+v", e)
	}
	for _, tt := range []struct{ name, toml, want string }{
		{"no memory", exec, `models.model.memory: is required for backend "exec"`},
		{"no command", "[[models.model]]\nname = \"sv\"\nbackend = \"exec\"\ndir = \"/srv\"\nmemory = \"1GiB\"\n", "models.model.command: is empty"},
		{"relative dir", strings.Replace(exec, "/srv/sv", "srv", 1) + "memory = \"1GiB\"\n", `models.model.dir: "srv" is not allowed`},
		{"protocol", exec + "memory = \"1GiB\"\nprotocol = \"grpc\"\n", `models.model.protocol: "grpc" is not allowed: want openai or multipart`},
		{"route", exec + "memory = \"1GiB\"\nhealth = \"health\"\n", `models.model.health: "health" is not allowed`},
		{"field without multipart", exec + "memory = \"1GiB\"\nfield = \"f\"\n", "only read with protocol = \"multipart\""},
		{"owned env", exec + "memory = \"1GiB\"\nenv = { SENSEVOICE_DEVICE = \"cuda:3\" }\n", `models.model.env: "SENSEVOICE_DEVICE": not allowed`},
		{"vad on exec", exec + "memory = \"1GiB\"\nvad = true\n", `models.model.vad: backend "exec" cannot do voice activity detection`},
		{"command elsewhere", "[[models.model]]\nname = \"w\"\nbackend = \"whisper.cpp\"\npath = \"/m.bin\"\ncommand = [\"x\"]\n", `models.model.command: is only read for backend "exec"`},
		{"vad without model", "[[models.model]]\nname = \"w\"\nbackend = \"whisper.cpp\"\npath = \"/m.bin\"\nvad = true\n", "models.model.vad: is true but vad_model is empty"},
		{"vad threshold", "[[models.model]]\nname = \"w\"\nbackend = \"whisper.cpp\"\npath = \"/m.bin\"\nvad_threshold = 2.0\n", "models.model.vad_threshold: 2 is not allowed"},
	} {
		_, err := Parse([]byte(tt.toml), "t.toml")
		if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
