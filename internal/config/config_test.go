package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func uid(n int) *int { return &n }

func TestDefaultFileMatchesDefaults(t *testing.T) {
	data, err := os.ReadFile("../../wsched.toml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(data, "wsched.toml")
	if err != nil {
		t.Fatalf("the annotated default wsched.toml does not parse: %v", err)
	}
	got.Source = ""
	if want := Defaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("wsched.toml differs from Defaults():\n got %+v\nwant %+v", got, want)
	}
}

// TestDefaultFileHasEveryKey keeps the annotated file complete: every key
// of Config appears in it, set or (for the sim examples) commented.
func TestDefaultFileHasEveryKey(t *testing.T) {
	data, err := os.ReadFile("../../wsched.toml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, k := range knownKeys(reflect.TypeOf(Config{}), nil) {
		leaf := k[strings.LastIndexByte(k, '.')+1:]
		if !strings.Contains(text, leaf+" = ") && !strings.Contains(text, "["+k+"]") && !strings.Contains(text, "[["+k+"]]") {
			t.Errorf("key %s is not documented in wsched.toml", k)
		}
	}
}

func TestStrictErrors(t *testing.T) {
	tests := []struct {
		name, toml, want string
		err              error
	}{
		{"unknown key", "[placement]\npolcy = \"spread\"\n",
			`t.toml:2: placement.polcy: unknown key (did you mean "placement.policy"?)`, ErrUnknownKey},
		{"unknown section", "[daemon]\nsocket = \"/tmp/x.sock\"\n\n[gpu]\nx = 1\n",
			`t.toml:4: gpu: unknown key`, ErrUnknownKey},
		{"bad size", "[placement]\nreserved = \"2 gigs\"\n",
			`t.toml:2: placement.reserved: "2 gigs": unknown unit "gigs" (one of B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)`, ErrBadValue},
		{"size without unit", "[estimator]\ncuda_context = \"400\"\n",
			`t.toml:2: estimator.cuda_context: "400": missing unit (one of B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)`, ErrBadValue},
		{"bad duration", "[inventory]\nmax_age = \"5\"\n",
			`t.toml:2: inventory.max_age: "5": bad number: want a Go duration such as "500ms", "30s", "5m"`, ErrBadValue},
		{"bad enum", "[placement]\n\npolicy = \"random\"\n",
			`t.toml:3: placement.policy: "random" is not allowed: want one of spread, binpack, score`, ErrBadValue},
		{"bad fraction", "[placement]\nsafety_factor = 1.5\n",
			`t.toml:2: placement.safety_factor: 1.5 is not allowed: want a number from 0 to 1`, ErrBadValue},
		{"nan fraction", "[placement]\nsafety_factor = nan\n",
			`t.toml:2: placement.safety_factor: NaN is not allowed: want a number from 0 to 1`, ErrBadValue},
		{"wrong type", "[leases]\nmax_queue = \"many\"\n",
			`t.toml:2: leases.max_queue: incompatible types: TOML value has type string; destination has type integer`, ErrBadValue},
		{"validation", "[leases]\nmax_queue = 0\n",
			`t.toml:2: leases.max_queue: 0 is not allowed: want 1 to 1000000`, ErrBadValue},
		{"sim used above memory", "[inventory]\nprovider = \"sim\"\n[[inventory.sim]]\nmemory = \"8GiB\"\n[[inventory.sim]]\nmemory = \"8GiB\"\nused = \"9GiB\"\n",
			`t.toml:7: inventory.sim.used: 9GiB is more than memory (8GiB)`, ErrBadValue},
		{"sim without gpus", "[inventory]\nprovider = \"sim\"\n",
			`t.toml:2: inventory.provider: "sim" needs at least one [[inventory.sim]] GPU`, ErrBadValue},
		{"reserved key", "[placement.reserved_per_gpu]\n\"cuda:0\" = \"1GiB\"\n",
			`t.toml:1: placement.reserved_per_gpu: key "cuda:0" is not allowed: want a GPU index ("0") or UUID`, ErrBadValue},
		{"relative plugin dir", "[backends]\nplugin_dir = \"plugins\"\n",
			`t.toml:2: backends.plugin_dir: "plugins" is not allowed: want an absolute path`, ErrBadValue},
		{"max restarts", "[backends]\n\nmax_restarts = -1\n",
			`t.toml:3: backends.max_restarts: -1 is not allowed: want 0 to 100`, ErrBadValue},
		{"health interval", "[backends]\nhealth_interval = \"1ms\"\n",
			`t.toml:2: backends.health_interval: 1ms is not allowed: want at least 100ms`, ErrBadValue},
		{"model without name", "[[backends.model]]\nname = \"a\"\nbackend = \"whisper.cpp\"\npath = \"/m/a.bin\"\n[[backends.model]]\nbackend = \"whisper.cpp\"\npath = \"/m/b.bin\"\n",
			`t.toml:5: backends.model.name: is empty: want the name clients ask for`, ErrBadValue},
		{"model name twice", "[[backends.model]]\nname = \"a\"\nbackend = \"whisper.cpp\"\npath = \"/m/a.bin\"\n[[backends.model]]\nname = \"a\"\nbackend = \"sensevoice\"\npath = \"/m/b\"\n",
			`t.toml:6: backends.model.name: "a" is already the name of model entry 1`, ErrBadValue},
		{"model without backend", "[[backends.model]]\nname = \"a\"\npath = \"/m/a.bin\"\n",
			`t.toml:1: backends.model.backend: is empty: want the backend that serves "a" (whisper.cpp, say)`, ErrBadValue},
		{"model path relative", "[[backends.model]]\nname = \"a\"\nbackend = \"whisper.cpp\"\npath = \"m/a.bin\"\n",
			`t.toml:4: backends.model.path: "m/a.bin" is not allowed: want an absolute path`, ErrBadValue},
		{"max_streams negative", "[[models.model]]\nname = \"a\"\nbackend = \"whisper.cpp\"\npath = \"/m/a.bin\"\nmax_streams = -2\n",
			`t.toml:5: models.model.max_streams: -2 is not allowed: want 1 to 256 (0 or absent: the backend's default)`, ErrBadValue},
		{"max_streams too many", "[[models.model]]\nname = \"a\"\nbackend = \"whisper.cpp\"\npath = \"/m/a.bin\"\nmax_streams = 1000\n",
			`t.toml:5: models.model.max_streams: 1000 is not allowed: want 1 to 256 (0 or absent: the backend's default)`, ErrBadValue},
		{"models_dir relative", "[backends]\nmodels_dir = \"models\"\n",
			`t.toml:2: backends.models_dir: "models" is not allowed: want an absolute path`, ErrBadValue},
		{"models_url not http", "[backends]\nmodels_url = \"ftp://example.org/m\"\n",
			`t.toml:2: backends.models_url: "ftp://example.org/m" is not allowed: want an http:// or https:// URL`, ErrBadValue},
		{"syntax", "[daemon\n", "", ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.toml), "t.toml")
			if !errors.Is(err, tt.err) {
				t.Fatalf("error = %v, want %v", err, tt.err)
			}
			if tt.want != "" && err.Error() != tt.want {
				t.Errorf("message\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestBadDeviceEnv(t *testing.T) {
	_, err := Load(Options{LookupEnv: env(map[string]string{"SENSEVOICE_DEVICE": "gpu1"}), UID: uid(0), Path: writeFile(t, "")})
	want := `SENSEVOICE_DEVICE: invalid device "gpu1": want one of auto, cuda, cuda:N, GPU-<uuid>, cpu`
	if !errors.Is(err, ErrBadValue) || err.Error() != want {
		t.Errorf("error = %v\nwant %s", err, want)
	}
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "wsched.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadEnvOverrides(t *testing.T) {
	path := writeFile(t, "[daemon]\nsocket = \"/srv/a.sock\"\n")
	cfg, err := Load(Options{
		LookupEnv: env(map[string]string{"WSCHED_CONFIG": path, "WSCHED_SOCKET": "/tmp/b.sock", "WSCHED_STATE_DIR": "/tmp/state", "WSCHED_DEVICE": "cuda:3"}),
		UID:       uid(1000),
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Source != path || cfg.Daemon.Socket != "/tmp/b.sock" || cfg.Daemon.StateDir != "/tmp/state" {
		t.Errorf("overrides not applied: %+v", cfg.Daemon)
	}
	if cfg.Device != (device.Spec{Kind: device.Index, Index: 3}) || cfg.DeviceVar != "WSCHED_DEVICE" {
		t.Errorf("device = %v from %q", cfg.Device, cfg.DeviceVar)
	}
}

func TestModelsDir(t *testing.T) {
	file := writeFile(t, "")
	withDir := writeFile(t, "[backends]\nmodels_dir = \"/srv/models\"\n")
	tests := []struct {
		name string
		path string
		uid  int
		env  map[string]string
		want string
	}{
		{"root", file, 0, nil, "/var/lib/wsched/models"},
		{"user with XDG_DATA_HOME", file, 1000, map[string]string{"XDG_DATA_HOME": "/d", "HOME": "/home/u"}, "/d/wsched/models"},
		{"user", file, 1000, map[string]string{"HOME": "/home/u"}, "/home/u/.local/share/wsched/models"},
		{"file", withDir, 0, nil, "/srv/models"},
		{"env over file", withDir, 1000, map[string]string{"WSCHED_MODELS_DIR": "/e/models"}, "/e/models"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(Options{Path: tt.path, LookupEnv: env(tt.env), UID: uid(tt.uid)})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Models.Dir != tt.want {
				t.Errorf("models_dir = %q, want %q", cfg.Models.Dir, tt.want)
			}
		})
	}
	// A relative path in the environment is the shell user's: against the working directory.
	cfg, err := Load(Options{Path: file, LookupEnv: env(map[string]string{"WSCHED_MODELS_DIR": "../rel"}), UID: uid(0)})
	wd, _ := os.Getwd()
	if want := filepath.Join(filepath.Dir(wd), "rel"); err != nil || cfg.Models.Dir != want {
		t.Errorf("relative WSCHED_MODELS_DIR: dir %q, error %v; want %s", cfg.Models.Dir, err, want)
	}
}

func TestModelEntries(t *testing.T) {
	cfg, err := Parse([]byte("[[backends.model]]\nname = \"turbo\"\nbackend = \"whisper.cpp\"\npath = \"/m/ggml-large-v3-turbo.bin\"\n[[backends.model]]\nname = \"sv\"\nbackend = \"sensevoice\"\npath = \"/m/sensevoice\"\n"), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := []Model{{Name: "turbo", Backend: "whisper.cpp", Path: "/m/ggml-large-v3-turbo.bin"}, {Name: "sv", Backend: "sensevoice", Path: "/m/sensevoice"}}
	if !reflect.DeepEqual(cfg.Models.Entries, want) || cfg.Models.URL != DefaultModelsURL {
		t.Errorf("models = %+v", cfg.Models)
	}
}

func TestLoadPathDefaults(t *testing.T) {
	path := writeFile(t, "")
	root, err := Load(Options{Path: path, LookupEnv: env(nil), UID: uid(0)})
	if err != nil {
		t.Fatal(err)
	}
	if root.Daemon.Socket != "/run/wsched/wsched.sock" || root.Daemon.StateDir != "/var/lib/wsched" {
		t.Errorf("root defaults: %+v", root.Daemon)
	}
	user, err := Load(Options{Path: path, LookupEnv: env(map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000", "HOME": "/home/u"}), UID: uid(1000)})
	if err != nil {
		t.Fatal(err)
	}
	if user.Daemon.Socket != "/run/user/1000/wsched.sock" || user.Daemon.StateDir != "/home/u/.local/state/wsched" {
		t.Errorf("user defaults: %+v", user.Daemon)
	}
	if _, err := Load(Options{Path: "/nonexistent/wsched.toml", LookupEnv: env(nil)}); err == nil || !strings.Contains(err.Error(), "/nonexistent/wsched.toml") {
		t.Errorf("missing file error = %v", err)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	cfg := Defaults()
	used := units.Bytes(3 * units.GiB)
	cfg.Inventory.Sim = []inventory.SimGPU{{Name: "x", Memory: units.Bytes(8 * units.GiB), Used: &used, Processes: []inventory.SimProcess{{PID: 7, Name: "p", Used: units.Bytes(units.GiB)}}}}
	cfg.Placement.ReservedPerGPU["1"] = units.Bytes(units.GiB)
	cfg.Models.Entries = []Model{{Name: "turbo", Backend: "whisper.cpp", Path: "/m/ggml-large-v3-turbo.bin"}}
	cfg.Models.Dir = "/srv/models"
	text, err := cfg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(text, "encoded")
	if err != nil {
		t.Fatalf("encoded config does not parse: %v\n%s", err, text)
	}
	back.Source = ""
	if !reflect.DeepEqual(back, cfg) {
		t.Errorf("round trip differs:\n%s", text)
	}
}

func TestLocate(t *testing.T) {
	text := "# c\n[a]\nx = 1 # note\n[[b]]\ny = 2\n[[b]]\ny = 3\n[a.c]\nz = \"#\"\n"
	tests := []struct {
		key  []string
		nth  int
		line int
	}{{[]string{"a", "x"}, 0, 3}, {[]string{"b", "y"}, 0, 5}, {[]string{"b", "y"}, 1, 7}, {[]string{"a", "c", "z"}, 0, 9}, {[]string{"a", "c"}, 0, 8}, {[]string{"q"}, 0, 0}}
	for _, tt := range tests {
		if got := locate([]byte(text), toml.Key(tt.key), tt.nth); got != tt.line {
			t.Errorf("locate(%v, %d) = %d, want %d", tt.key, tt.nth, got, tt.line)
		}
	}
}

// TestModelMaxStreams (issue 26): max_streams is read per model entry.
func TestModelMaxStreams(t *testing.T) {
	cfg, err := Parse([]byte("[[models.model]]\nname = \"tiny\"\nbackend = \"whisper.cpp\"\npath = \"/m/ggml-tiny.bin\"\nmax_streams = 8\n"), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Models.Entries[0].MaxStreams; got != 8 {
		t.Errorf("max_streams = %d, want 8", got)
	}
}

// TestModelStreamMemory: stream_memory is read as a size, and refused
// (naming the key) when it is more than the instance's memory.
func TestModelStreamMemory(t *testing.T) {
	entry := "[[models.model]]\nname = \"app\"\nbackend = \"exec\"\npath = \"/v1/audio/transcriptions\"\nmemory = \"4GiB\"\nmax_streams = 4\n"
	cfg, err := Parse([]byte(entry+"stream_memory = \"512MiB\"\n"), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Models.Entries[0].StreamMemory; got != 512<<20 {
		t.Errorf("stream_memory = %d, want %d", got, 512<<20)
	}
	_, err = Parse([]byte(entry+"stream_memory = \"5GiB\"\n"), "t.toml")
	if err == nil || !strings.Contains(err.Error(), "stream_memory") || !strings.Contains(err.Error(), "more than memory") {
		t.Errorf("stream_memory above memory: %v", err)
	}
}
