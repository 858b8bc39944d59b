package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/enforce"
	"github.com/wsched/wsched/enforce/nvmllimits"
	"github.com/wsched/wsched/enforce/nvmllimits/fakenvml"
	"github.com/wsched/wsched/internal/cgroup"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// On a host where the driver's limits apply (R615 on the simulated GPU, the
// dmem controller and the call on a fake libnvidia-ml.so.1), auto takes
// nvml-limits, and a backend's cgroup gets soft = lease, hard = lease +
// borrow before the backend starts; a resize of its lease sets them again;
// when the instance stops they are cleared while the cgroup still exists,
// and then the cgroup is gone.
func TestNVMLLimitsOnBackendCgroup(t *testing.T) {
	if m, err := cgroup.Open("/proc", "wsched-limits-probe"); err != nil {
		t.Skipf("no writable cgroup hierarchy: %v", err)
	} else {
		_ = m.Close()
	}
	lib, err := fakenvml.Build("", t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(t.TempDir(), "calls")
	t.Setenv(fakenvml.LogEnv, calls)
	td, audio := limitsDaemon(t, lib)

	status, body := td.raw("GET", "/v1/gpus", "")
	if status != 200 || !strings.Contains(body, `"tier":"nvml-limits"`) {
		t.Fatalf("GET /v1/gpus: %d, want tier nvml-limits: %s", status, body)
	}
	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	if j = td.waitJob(t, j.ID, finished); j.State != "completed" {
		t.Fatalf("job: %+v", j)
	}
	lease := backendLease(t, td)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := td.d.eng.Resize(ctx, lease.ID, 3*GiB); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, calls, 3)
	td.stop()

	got, err := fakenvml.Calls(calls)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 2 || got[0] != "init" {
		t.Fatalf("NVML calls %q", got)
	}
	dir := strings.Fields(got[1])[2]
	want := []string{"init",
		fmt.Sprintf("set %s %s %d %d", lease.GPU, dir, 2*GiB, 3*GiB),
		fmt.Sprintf("set %s %s %d %d", lease.GPU, dir, 3*GiB, 4*GiB),
		fmt.Sprintf("set %s %s 0 %d", lease.GPU, dir, uint64(nvmllimits.Unlimited)),
		"shutdown",
	}
	if !slices.Equal(got, want) {
		t.Errorf("NVML calls:\n%q\nwant\n%q", got, want)
	}
	if !strings.Contains(dir, "/backend-"+lease.ID+"-") {
		t.Errorf("limits set on %s, not the backend's cgroup", dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("backend cgroup %s left: %v", dir, err)
	}
}

// limitsDaemon is jobDaemon's setup (one 24 GiB simulated GPU, the fake
// backend, fake-tiny with a 2 GiB lease, borrow 1 GiB) on a simulated R615
// driver, with the host facts the nvml-limits tier needs.
func limitsDaemon(t *testing.T, lib string) (*testDaemon, string) {
	t.Helper()
	plugins, dir := fakeBackendDir(t), t.TempDir()
	model, audio := filepath.Join(dir, "fake-tiny.bin"), filepath.Join(dir, "audio.wav")
	_ = os.WriteFile(model, []byte("model"), 0o644)
	_ = os.WriteFile(audio, []byte("RIFF fake audio"), 0o644)
	cfg := simConfig(t, 1, 24*GiB, func(c *config.Config) {
		c.Enforcement.Borrow = units.Bytes(GiB)
		c.Backends.PluginDir, c.Backends.DevDirs = plugins, nil
		c.Models.Dir = filepath.Join(dir, "models")
		c.Models.Entries = []config.Model{{Name: "fake-tiny", Backend: "fake", Path: model, Memory: units.Bytes(2 * GiB)}}
		c.Models.Default = "fake-tiny"
	})
	facts := func(f enforce.Facts) enforce.Facts {
		f.Dmem, f.NVMLLib, f.Root = true, lib, true
		f.LimitsCall = nvmllimits.Has(lib)
		return f
	}
	td := runDaemonWith(t, cfg, func(sim *inventory.Sim, o *Options) {
		sim.SetDriver("615.43.02")
		o.Facts = facts
	})
	return td, audio
}

// backendLease is the one GPU lease the daemon itself holds (its backend's).
func backendLease(t *testing.T, td *testDaemon) placement.Lease {
	t.Helper()
	for _, g := range td.d.eng.View().GPUs {
		for _, l := range g.Leases {
			if l.Holder.PID == os.Getpid() {
				return l
			}
		}
	}
	t.Fatal("no backend lease on the GPU")
	return placement.Lease{}
}

// waitCalls waits (30 s at most) until the fake NVML library logged n calls.
func waitCalls(t *testing.T, path string, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, _ := fakenvml.Calls(path)
		if len(got) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fake NVML logged %q, want %d calls", got, n)
		}
	}
}

// A `wsched run` child's cgroup (here made as `wsched run` makes it, with a
// process in it) gets the lease's limits when the process is added to the
// lease, again on a resize, and they are cleared when the lease is
// released while the cgroup is still there.
func TestNVMLLimitsOnRunCgroup(t *testing.T) {
	m, err := cgroup.Open("/proc", fmt.Sprintf("wsched-run-%d", os.Getpid()))
	if err != nil {
		t.Skipf("no writable cgroup hierarchy: %v", err)
	}
	defer m.Close()
	g, err := m.New("child")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer g.Remove(ctx)
	child := exec.Command("sleep", "60")
	if err := g.Start(child); err != nil {
		t.Fatal(err)
	}
	go child.Wait()
	lib, err := fakenvml.Build("", t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(t.TempDir(), "calls")
	t.Setenv(fakenvml.LogEnv, calls)
	td, _ := limitsDaemon(t, lib)

	status, body := td.raw("POST", "/v1/leases", `{"memory_bytes": 1073741824, "device": "cuda:0"}`)
	var l api.Lease
	if err := json.Unmarshal([]byte(body), &l); status/100 != 2 || err != nil || l.GPUUUID == "" {
		t.Fatalf("grant: %d %v %s", status, err, body)
	}
	if status, body := td.raw("POST", "/v1/leases/"+l.ID+"/pids", fmt.Sprintf(`{"pid": %d}`, child.Process.Pid)); status != 200 {
		t.Fatalf("add pid: %d %s", status, body)
	}
	waitCalls(t, calls, 2)
	if _, err := td.d.eng.Resize(ctx, l.ID, 2*GiB); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, calls, 3)
	if status, body := td.raw("DELETE", "/v1/leases/"+l.ID, ""); status/100 != 2 {
		t.Fatalf("release: %d %s", status, body)
	}
	waitCalls(t, calls, 4)
	got, _ := fakenvml.Calls(calls)
	want := []string{"init",
		fmt.Sprintf("set %s %s %d %d", l.GPUUUID, g.Dir(), 1*GiB, 2*GiB),
		fmt.Sprintf("set %s %s %d %d", l.GPUUUID, g.Dir(), 2*GiB, 3*GiB),
		fmt.Sprintf("set %s %s 0 %d", l.GPUUUID, g.Dir(), uint64(nvmllimits.Unlimited)),
	}
	if !slices.Equal(got, want) {
		t.Errorf("NVML calls:\n%q\nwant\n%q", got, want)
	}
}
