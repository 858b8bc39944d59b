package enforce

import (
	"maps"
	"strings"
	"testing"

	"github.com/wsched/wsched/placement"
)

// Tier choice from simulated driver versions and kernel features.
func TestChoose(t *testing.T) {
	all := Facts{Driver: "615.43.02", Dmem: true, LimitsCall: true, Root: true, MPSPipe: "/run/mps", PreloadLib: "/usr/lib/wsched/libwsched_cuda_cap.so"}
	with := func(mod func(*Facts)) Facts { f := all; mod(&f); return f }
	tests := []struct {
		name, mode string
		facts      Facts
		want       Tier
		reason     string // a part of the reason
	}{
		{"R615 with dmem", "auto", all, NVMLLimits, "dmem cgroup controller enforce"},
		{"R610 driver", "auto", with(func(f *Facts) { f.Driver = "610.1" }), MPS, `not nvml-limits: driver "610.1" is older than R615`},
		{"no dmem (kernel < 6.14)", "auto", with(func(f *Facts) { f.Dmem = false }), MPS, "no dmem cgroup controller"},
		{"MIG", "auto", with(func(f *Facts) { f.MIG = true }), MPS, "MIG mode"},
		{"no limits call in this build", "auto", with(func(f *Facts) { f.LimitsCall = false }), MPS, "does not export nvmlDeviceSetMemoryLimits_v1"},
		{"daemon not root", "auto", with(func(f *Facts) { f.Root = false }), MPS, "needs root"},
		{"old driver, no MPS", "auto", with(func(f *Facts) { f.Driver, f.MPSPipe = "550.54.15", "" }), Preload, "not mps: no MPS control daemon"},
		{"unknown driver, nothing", "auto", Facts{}, Detect, "the allocation cap library is not installed"},
		{"mode preload over a stronger host", "preload", all, Preload, "caps the CUDA driver"},
		{"mode mps without MPS", "mps", with(func(f *Facts) { f.MPSPipe = "" }), Preload, "not mps"},
		{"mode nvml-limits on an old driver", "nvml-limits", with(func(f *Facts) { f.Driver = "570.1" }), MPS, "older than R615"},
		{"mode detect", "detect", all, Detect, "next NVML sample"},
		{"mps off", "auto", with(func(f *Facts) { f.Driver, f.MPSOff = "550.1", true }), Preload, `not mps: [enforcement] mps = "off"`},
		{"mode preload, no library", "preload", with(func(f *Facts) { f.PreloadLib = "" }), Detect, "not installed"},
	}
	for _, tt := range tests {
		got := Choose(tt.mode, tt.facts)
		if got.Tier != tt.want || !strings.Contains(got.Reason, tt.reason) {
			t.Errorf("%s: %+v, want %s with a reason containing %q", tt.name, got, tt.want, tt.reason)
		}
	}
}

func TestDriverMajor(t *testing.T) {
	for v, want := range map[string]int{"615.43.02": 615, "550": 550, " 580.1 ": 580, "": 0, "x.1": 0} {
		if got := DriverMajor(v); got != want {
			t.Errorf("DriverMajor(%q) = %d, want %d", v, got, want)
		}
	}
}

func TestMPSEnv(t *testing.T) {
	got := MPSEnv("GPU-1234", 6<<30+1, "/run/mps")
	want := map[string]string{"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "GPU-1234=6145M", "CUDA_MPS_PIPE_DIRECTORY": "/run/mps"}
	if !maps.Equal(got, want) {
		t.Errorf("MPSEnv = %v, want %v", got, want)
	}
	if got := MPSEnv("GPU-1", 512<<20, ""); !maps.Equal(got, map[string]string{"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "GPU-1=512M"}) {
		t.Errorf("MPSEnv without a pipe = %v", got)
	}
}

// Each GPU gets its own tier (MIG drops nvml-limits on that GPU only), and
// a holder's environment follows its GPU's tier.
func TestEnforcerPerGPU(t *testing.T) {
	host := Facts{Driver: "615.1", Dmem: true, LimitsCall: true, Root: true, PreloadLib: "/lib/cap.so"}
	e := NewEnforcer("auto", host, map[string]bool{"GPU-a": false, "GPU-m": true}, 1<<30, "/run/w.sock")
	if e.For("GPU-a").Tier != NVMLLimits || e.For("GPU-m").Tier != Preload || e.For("GPU-new").Tier != NVMLLimits {
		t.Errorf("choices: a %+v, m %+v, new %+v", e.For("GPU-a"), e.For("GPU-m"), e.For("GPU-new"))
	}
	env := e.Env(placement.Lease{GPU: "GPU-m", Bytes: 2 << 30})
	if env["LD_PRELOAD"] != "/lib/cap.so" || env["WSCHED_CUDA_LIMIT_BYTES"] != "3221225472" || env["WSCHED_SOCKET"] != "/run/w.sock" {
		t.Errorf("preload env %v", env)
	}
	if env := e.Env(placement.Lease{GPU: "GPU-a", Bytes: 1 << 30}); env != nil {
		t.Errorf("nvml-limits env %v, want none (the limit is on the cgroup)", env)
	}
	if env := e.Env(placement.Lease{GPU: placement.CPU}); env != nil {
		t.Errorf("CPU lease env %v", env)
	}
	m := NewEnforcer("auto", Facts{MPSPipe: "/tmp/nvidia-mps"}, map[string]bool{"GPU-b": false}, 0, "")
	if env := m.Env(placement.Lease{GPU: "GPU-b", Bytes: 1 << 30}); env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] != "GPU-b=1024M" {
		t.Errorf("mps env %v", env)
	}
}

// Probe reads an MPS pipe (a FIFO named control) and the library from the
// directories given.
func TestProbe(t *testing.T) {
	dir := t.TempDir()
	env := func(k string) (string, bool) {
		if k == "CUDA_MPS_PIPE_DIRECTORY" {
			return dir, true
		}
		return "", false
	}
	if f := Probe("/proc", "615.1", env, []string{dir}, ""); f.MPSPipe != "" || f.PreloadLib != "" || f.Driver != "615.1" {
		t.Errorf("empty dir: %+v", f)
	}
	if err := mkfifo(dir + "/control"); err != nil {
		t.Fatal(err)
	}
	if err := touch(dir + "/libwsched_cuda_cap.so"); err != nil {
		t.Fatal(err)
	}
	if f := Probe("/proc", "", env, []string{dir}, ""); f.MPSPipe != dir || f.PreloadLib != dir+"/libwsched_cuda_cap.so" {
		t.Errorf("with a pipe and the library: %+v", f)
	}
}
