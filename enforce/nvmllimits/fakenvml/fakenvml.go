// Package fakenvml builds, for tests, a fake libnvidia-ml.so.1 (c/fakenvml.c,
// C) that answers the calls package nvmllimits makes and appends each to a
// log file, so that tests see when limits were set, changed and cleared
// without a GPU.
package fakenvml

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed c/fakenvml.c
var source []byte

// LogEnv names the file the fake appends its calls to: "init",
// "shutdown", "set UUID CGROUPDIR SOFT HARD" (+ " missing" when CGROUPDIR
// does not exist).
const LogEnv = "WSCHED_FAKE_NVML_LOG"

// Build compiles the fake into dir as libnvidia-ml.so.1 and returns its
// path; limits false leaves out nvmlDeviceSetMemoryLimits_v1 (a driver
// before R615). cc is the C compiler ("" for $CC or cc).
func Build(cc, dir string, limits bool) (string, error) {
	if cc == "" {
		cc = os.Getenv("CC")
	}
	if cc == "" {
		cc = "cc"
	}
	src := filepath.Join(dir, "fakenvml.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", fmt.Errorf("fakenvml: %w", err)
	}
	lib := filepath.Join(dir, "libnvidia-ml.so.1")
	args := []string{"-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-Wl,-soname,libnvidia-ml.so.1", "-o", lib, src, "-lpthread"}
	if !limits {
		args = append(args, "-DNO_LIMITS")
	}
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("fakenvml: %s %s: %w\n%s", cc, strings.Join(args, " "), err, out)
	}
	return lib, nil
}

// Calls reads the log at path: one call a line ("" when nothing was called).
func Calls(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("fakenvml: %w", err)
	}
	s := strings.TrimSpace(string(data))
	if s == "" {
		return nil, nil
	}
	return strings.Split(s, "\n"), nil
}
