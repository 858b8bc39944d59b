package nvmllimits_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wsched/wsched/enforce/nvmllimits"
	"github.com/wsched/wsched/enforce/nvmllimits/fakenvml"
)

// The call reaches the library with the cgroup's path and both limits, and
// Clear sets soft 0 and the unlimited hard limit.
func TestSetAndClear(t *testing.T) {
	dir := t.TempDir()
	lib, err := fakenvml.Build("", dir, true)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "calls")
	t.Setenv(fakenvml.LogEnv, log)
	if !nvmllimits.Has(lib) {
		t.Fatalf("Has(%s) = false, want true", lib)
	}
	l, err := nvmllimits.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	const uuid = "GPU-aaaa"
	cg := t.TempDir() // stands in for the cgroup's directory
	if err := l.Set(uuid, cg, 2<<30, 3<<30); err != nil {
		t.Fatal(err)
	}
	if err := l.Clear(uuid, cg); err != nil {
		t.Fatal(err)
	}
	var nvmlErr *nvmllimits.NVMLError
	if err := l.Set("not-a-uuid", cg, 1, 2); !errors.As(err, &nvmlErr) || nvmlErr.Code != 3 {
		t.Errorf("Set on an unknown device: %v, want NVML error 3", err)
	}
	_ = l.Close()
	calls, err := fakenvml.Calls(log)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"init", fmt.Sprintf("set %s %s %d %d", uuid, cg, 2<<30, 3<<30),
		fmt.Sprintf("set %s %s 0 %d", uuid, cg, uint64(nvmllimits.Unlimited)), "shutdown"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls:\n%q\nwant\n%q", calls, want)
	}
}

// A library without the R615 call is found out by the symbol probe: Has is
// false and Open says ErrNoCall; a library that does not load is not Has.
func TestOlderDriverHasNoCall(t *testing.T) {
	lib, err := fakenvml.Build("", t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	if nvmllimits.Has(lib) {
		t.Errorf("Has(%s) = true for a library without %s", lib, nvmllimits.SetSymbol)
	}
	if _, err := nvmllimits.Open(lib); !errors.Is(err, nvmllimits.ErrNoCall) {
		t.Errorf("Open: %v, want ErrNoCall", err)
	}
	if nvmllimits.Has(filepath.Join(t.TempDir(), "libnvidia-ml.so.1")) {
		t.Error("Has = true for a library that does not exist")
	}
}

// A call after Close is ErrClosed, not a call into the unloaded library
// (which would crash the daemon: its limits' owner may still be clearing a
// cgroup's limits when the daemon closes the library), and closing again
// does nothing.
func TestSetAfterClose(t *testing.T) {
	dir := t.TempDir()
	lib, err := fakenvml.Build("", dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakenvml.LogEnv, filepath.Join(dir, "calls"))
	l, err := nvmllimits.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Clear("GPU-aaaa", t.TempDir()); !errors.Is(err, nvmllimits.ErrClosed) {
		t.Errorf("Clear after Close: %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Open names the loader's reason for a library that does not load.
func TestOpenSaysWhy(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	_, err := nvmllimits.Open(missing)
	if err == nil || !strings.Contains(err.Error(), "No such file") {
		t.Errorf("Open(%s): %v, want the loader's reason", missing, err)
	}
}
