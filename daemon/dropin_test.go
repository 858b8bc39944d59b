package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/jobs"
)

// dropinPackage is a backend written as an out-of-tree one would be.
const dropinPackage = "./testdata/dropin"

var dropinPlugins pluginBuild

// dropinDir holds the drop-in backend twice: wsched-backend-echo (CPU and
// CUDA) and wsched-backend-echocpu (a CPU-only build).
func dropinDir(t *testing.T) string {
	return dropinPlugins.dir(t, "wsched-dropin-plugins-",
		[2]string{"wsched-backend-echo", dropinPackage}, [2]string{"wsched-backend-echocpu", dropinPackage})
}

// TestDropInBackendImportsOnlyTheSDK: the drop-in backend links no daemon
// package: only the SDK (plugins, its descriptor and protocol packages).
func TestDropInBackendImportsOnlyTheSDK(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", dropinPackage).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(out)) {
		rest, ours := strings.CutPrefix(p, "github.com/wsched/wsched/")
		if ours && rest != "daemon/testdata/dropin" && rest != "internal/confval" && rest != "plugins" && !strings.HasPrefix(rest, "plugins/descriptor") && rest != "plugins/proto" {
			t.Errorf("the drop-in backend links %s", p)
		}
	}
}

// TestDropInBackend: a backend the daemon has never heard of, dropped into
// the plugin directory, describes itself: the daemon lists its models
// (found by its layout in models_dir, and configured with its options),
// sizes them by its rule, leases the memory and runs jobs with it; a
// CPU-only build of it is placed on the CPU with no GPU memory.
func TestDropInBackend(t *testing.T) {
	plugins, dir := dropinDir(t), t.TempDir()
	models, audio := filepath.Join(dir, "models"), filepath.Join(dir, "audio.wav")
	_ = os.MkdirAll(models, 0o755)
	hello := filepath.Join(models, "hello.echo")
	for path, text := range map[string]string{hello: "hello from a drop-in", audio: "RIFF"} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	td := startDaemon(t, 1, 24*GiB, func(c *config.Config) {
		c.Backends.PluginDir, c.Backends.DevDirs = plugins, nil
		c.Models.Dir = models
		c.Models.Entries = []config.Model{
			{Name: "loud", Backend: "echo", Path: hello, Options: map[string]any{"shout": true, "prefix": "> "}},
			{Name: "on-cpu", Backend: "echocpu", Path: hello},
		}
	})
	status, body := td.raw("GET", "/v1/models", "")
	for _, name := range []string{`"hello"`, `"loud"`, `"on-cpu"`} {
		if status != 200 || !strings.Contains(body, name) {
			t.Errorf("GET /v1/models lacks %s: %d %s", name, status, body)
		}
	}
	var bs api.Backends
	if status, body = td.raw("GET", "/v1/backends", ""); json.Unmarshal([]byte(body), &bs) != nil || len(bs.Backends) != 2 {
		t.Fatalf("GET /v1/backends: %d %s", status, body)
	}
	if d := bs.Backends[0].Descriptor; d == nil || d.Name != "echo" || d.Plugin != "echo" || len(d.Options) != 2 || d.CPUOnly() {
		t.Errorf("echo's descriptor %+v", d)
	}
	if d := bs.Backends[1].Descriptor; d == nil || !d.CPUOnly() {
		t.Errorf("echocpu's descriptor %+v: want CPU only", d)
	}

	want := int64(1<<30) + 2*int64(len("hello from a drop-in")) // its rule: 1 GiB + 2 × the file
	for _, tt := range []struct{ model, text string }{{"hello", "hello from a drop-in"}, {"loud", "> HELLO FROM A DROP-IN"}} {
		j := td.waitJob(t, td.submit(t, fmt.Sprintf(`{"audio_path": %q, "model": %q}`, audio, tt.model)).ID, finished)
		if j.State != jobs.Completed || j.Result == nil || j.Result.Text != tt.text {
			t.Fatalf("job on %s: %s %q %+v, want text %q", tt.model, j.State, j.Error, j.Result, tt.text)
		}
		if j.Backend != "echo" || j.GPUIndex != 0 || j.MemoryBytes != want || j.LeaseID == "" {
			t.Errorf("job on %s placed on backend %q GPU %d with %d bytes (lease %q), want echo on GPU 0 with %d", tt.model, j.Backend, j.GPUIndex, j.MemoryBytes, j.LeaseID, want)
		}
	}

	j := td.waitJob(t, td.submit(t, fmt.Sprintf(`{"audio_path": %q, "model": "on-cpu"}`, audio)).ID, finished)
	if j.State != jobs.Completed || j.Backend != "echocpu" || j.GPUIndex != -1 || j.GPUUUID != "cpu" || j.MemoryBytes != 0 {
		t.Errorf("job on the CPU-only build: %s %q backend %q GPU %d %q, %d bytes; want completed on the CPU with no GPU memory",
			j.State, j.Error, j.Backend, j.GPUIndex, j.GPUUUID, j.MemoryBytes)
	}
	ls := td.leasesBy(t, "echo", "echo", "echocpu") // warm instances keep their leases
	for _, l := range ls {
		if l.Labels["wsched.backend"] == "echocpu" && !strings.Contains(l.Labels["wsched.device"], "cannot use CUDA in this build") {
			t.Errorf("the CPU lease's labels %v do not say why it is on the CPU", l.Labels)
		}
	}
}

// TestDropInOptionsChecked: an option the backend's descriptor refuses stops
// the daemon at start, naming the key.
func TestDropInOptionsChecked(t *testing.T) {
	plugins, dir := dropinDir(t), t.TempDir()
	cfg := config.Defaults()
	cfg.Daemon.StateDir, cfg.Daemon.Socket = filepath.Join(dir, "state"), filepath.Join(dir, "wsched.sock")
	cfg.Backends.PluginDir, cfg.Backends.DevDirs = plugins, nil
	cfg.Inventory.Provider = "none"
	cfg.Models.Entries = []config.Model{{Name: "x", Backend: "echo", Path: "/m/x.echo", Memory: units.Bytes(GiB), Options: map[string]any{"shout": "yes"}}}
	d, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := d.Run(ctx); err == nil || !strings.Contains(err.Error(), "models.model#0.options.shout: yes is not allowed: want true or false") {
		t.Errorf("Run with shout = \"yes\": %v", err)
	}
}
