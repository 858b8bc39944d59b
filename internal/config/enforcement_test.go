package config

import (
	"strings"
	"testing"

	"github.com/wsched/wsched/internal/units"
)

func TestEnforcementKeys(t *testing.T) {
	cfg, err := Parse([]byte("[enforcement]\nmode = \"preload\"\nborrow = \"2GiB\"\n"), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Enforcement.Mode != "preload" || cfg.Enforcement.Borrow != units.Bytes(2*units.GiB) {
		t.Errorf("enforcement %+v", cfg.Enforcement)
	}
	if Defaults().Enforcement.Mode != "auto" {
		t.Errorf("default mode %q, want auto", Defaults().Enforcement.Mode)
	}
	for _, bad := range []string{"mode = \"strict\"", "borrow = \"-1GiB\"", "reclaim_grace = \"0s\"", "mps = \"maybe\""} {
		_, err := Parse([]byte("[enforcement]\n"+bad+"\n"), "t.toml")
		if err == nil || !strings.Contains(err.Error(), "enforcement.") {
			t.Errorf("%s: err %v, want one naming the key", bad, err)
		}
	}
}
