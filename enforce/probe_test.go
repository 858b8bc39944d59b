package enforce

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/enforce/nvmllimits/fakenvml"
)

// fakeProc is a /proc whose self/mountinfo mounts cgroup v2 on a directory
// whose cgroup.controllers lists controllers.
func fakeProc(t *testing.T, controllers string) string {
	t.Helper()
	root, cg := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	mountinfo := "30 25 0:26 / " + cg + " rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n"
	for name, data := range map[string]string{
		filepath.Join(root, "self/mountinfo"):   mountinfo,
		filepath.Join(root, "self/cgroup"):      "0::/\n",
		filepath.Join(cg, "cgroup.controllers"): controllers + "\n",
	} {
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// auto takes nvml-limits only where the driver is R615 or newer, the
// kernel has the dmem controller and the NVML library exports the
// memory-limits call (probed on fake libraries, with and without it).
func TestProbeLimitsCall(t *testing.T) {
	with, err := fakenvml.Build("", t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	without, err := fakenvml.Build("", t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	dmem, plain := fakeProc(t, "cpu memory pids dmem"), fakeProc(t, "cpu memory pids")
	none := func(string) (string, bool) { return "", false }
	cases := []struct {
		name, proc, driver, lib string
		want                    Tier
		why                     string
	}{
		{"all there", dmem, "615.43.02", with, NVMLLimits, "enforce per-cgroup limits"},
		{"no symbol", dmem, "615.43.02", without, Detect, "does not export nvmlDeviceSetMemoryLimits_v1"},
		{"old driver", dmem, "580.95.05", with, Detect, "older than R615"},
		{"no dmem", plain, "615.43.02", with, Detect, "no dmem cgroup controller"},
		{"no library", dmem, "615.43.02", filepath.Join(t.TempDir(), "libnvidia-ml.so.1"), Detect, "does not export"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := Probe(c.proc, c.driver, none, nil, c.lib)
			f.Root = true // the probe reads the euid; the root case is TestChoose's
			got := Choose(Auto, f)
			if got.Tier != c.want || !strings.Contains(got.Reason, c.why) {
				t.Errorf("facts %+v: %+v, want %s because %q", f, got, c.want, c.why)
			}
		})
	}
}
