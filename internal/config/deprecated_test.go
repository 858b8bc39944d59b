package config

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/units"
)

// TestDeprecatedKeys: every old [backends] key is still read, its value
// lands on the new key, and a deprecation names old and new key and line.
func TestDeprecatedKeys(t *testing.T) {
	text := `[backends]
max_retries = 7
job_timeout = "2h"
result_ttl = "1h"
max_active_jobs = 9
max_upload = "2GiB"
default_model = "tiny"
models_dir = "/srv/models"
models_url = "https://mirror.example/whisper"
keep_alive = "1m"

[[backends.model]]
name = "turbo"
backend = "whisper.cpp"
path = "/m/turbo.bin"
`
	cfg, err := Parse([]byte(text), "old.toml")
	if err != nil {
		t.Fatal(err)
	}
	wantJobs := Defaults().Jobs // the keys the old names do not set keep their defaults
	wantJobs.MaxRetries, wantJobs.Timeout, wantJobs.ResultTTL = 7, units.Duration(2*time.Hour), units.Duration(time.Hour)
	wantJobs.MaxActive, wantJobs.MaxUpload = 9, units.Bytes(2*units.GiB)
	if cfg.Jobs != wantJobs {
		t.Errorf("jobs = %+v, want %+v", cfg.Jobs, wantJobs)
	}
	wantModels := Models{Dir: "/srv/models", URL: "https://mirror.example/whisper", Default: "tiny",
		Entries: []Model{{Name: "turbo", Backend: "whisper.cpp", Path: "/m/turbo.bin"}}}
	if !reflect.DeepEqual(cfg.Models, wantModels) {
		t.Errorf("models = %+v, want %+v", cfg.Models, wantModels)
	}
	if cfg.Backends.KeepAlive != units.Duration(time.Minute) {
		t.Errorf("keep_alive = %v: a kept [backends] key was lost", cfg.Backends.KeepAlive)
	}
	var got []string
	for _, d := range cfg.Deprecations {
		got = append(got, d.String())
	}
	want := []string{
		"old.toml:2: backends.max_retries is deprecated, use jobs.max_retries (the value was applied)",
		"old.toml:3: backends.job_timeout is deprecated, use jobs.timeout (the value was applied)",
		"old.toml:4: backends.result_ttl is deprecated, use jobs.result_ttl (the value was applied)",
		"old.toml:5: backends.max_active_jobs is deprecated, use jobs.max_active (the value was applied)",
		"old.toml:6: backends.max_upload is deprecated, use jobs.max_upload (the value was applied)",
		"old.toml:7: backends.default_model is deprecated, use models.default (the value was applied)",
		"old.toml:8: backends.models_dir is deprecated, use models.dir (the value was applied)",
		"old.toml:9: backends.models_url is deprecated, use models.url (the value was applied)",
		"old.toml:13: backends.model is deprecated, use models.model (the value was applied)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("deprecations:\n got %q\nwant %q", got, want)
	}
}

func TestDeprecatedKeyErrors(t *testing.T) {
	tests := []struct {
		name, toml, want string
		err              error
	}{
		{"both names", "[backends]\njob_timeout = \"2h\"\n[jobs]\ntimeout = \"1h\"\n",
			"t.toml:2: backends.job_timeout: is the deprecated name of jobs.timeout, which is set too: keep only jobs.timeout", ErrBadValue},
		{"bad old value names the old key", "[backends]\nmax_retries = 500\n",
			"t.toml:2: backends.max_retries: 500 is not allowed: want 0 to 100", ErrBadValue},
		{"bad old model entry", "[[backends.model]]\nname = \"a\"\nbackend = \"b\"\npath = \"rel\"\n",
			`t.toml:4: backends.model.path: "rel" is not allowed: want an absolute path`, ErrBadValue},
		{"unknown key in an old table", "[[backends.model]]\nname = \"a\"\nbakend = \"b\"\n",
			`t.toml:3: backends.model.bakend: unknown key`, ErrUnknownKey},
		{"bad old type", "[backends]\nmax_active_jobs = \"many\"\n", "", ErrBadValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.toml), "t.toml")
			if !errors.Is(err, tt.err) || (tt.want != "" && err.Error() != tt.want) {
				t.Errorf("error = %v\nwant    %s (%v)", err, tt.want, tt.err)
			}
		})
	}
}

func TestNewKeysHaveNoDeprecations(t *testing.T) {
	cfg, err := Parse([]byte("[jobs]\ntimeout = \"2h\"\n[models]\ndir = \"/m\"\n[[models.model]]\nname = \"a\"\nbackend = \"b\"\npath = \"/a\"\n"), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Deprecations) != 0 || cfg.Jobs.Timeout != units.Duration(2*time.Hour) || cfg.Models.Dir != "/m" || len(cfg.Models.Entries) != 1 {
		t.Errorf("cfg = %+v %+v, deprecations %v", cfg.Jobs, cfg.Models, cfg.Deprecations)
	}
}
