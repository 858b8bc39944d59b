package enforce

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wsched/wsched/enforce/nvmllimits"
	"github.com/wsched/wsched/enforce/preload"
	"github.com/wsched/wsched/internal/cgroup"
)

// DefaultMPSPipe is where nvidia-cuda-mps-control makes its pipes unless
// CUDA_MPS_PIPE_DIRECTORY says otherwise.
const DefaultMPSPipe = "/tmp/nvidia-mps"

// Probe reads the host's facts: driver is the NVIDIA driver version the
// inventory read, lookupEnv the daemon's environment, libDirs where the
// preload library may be (preload.Dirs()), nvmlLib the NVML library
// (nvmllimits.DefaultLibrary; "" skips it). The NVML library is loaded
// only where the driver (R615+) and the kernel (dmem) could enforce limits,
// to see whether it exports the memory-limits call.
func Probe(procRoot, driver string, lookupEnv func(string) (string, bool), libDirs []string, nvmlLib string) Facts {
	f := Facts{Driver: driver, Dmem: hasDmem(procRoot), NVMLLib: nvmlLib, Root: os.Geteuid() == 0}
	f.LimitsCall = nvmlLib != "" && f.Dmem && DriverMajor(driver) >= MinLimitsDriver && nvmllimits.Has(nvmlLib)
	pipe := DefaultMPSPipe
	if v, ok := lookupEnv("CUDA_MPS_PIPE_DIRECTORY"); ok && v != "" {
		pipe = v
	}
	if st, err := os.Stat(filepath.Join(pipe, "control")); err == nil && st.Mode()&os.ModeNamedPipe != 0 {
		f.MPSPipe = pipe
	}
	f.PreloadLib, _ = preload.Find(libDirs)
	return f
}

// hasDmem reports whether the cgroup v2 root lists the dmem controller.
func hasDmem(procRoot string) bool {
	hs, err := cgroup.Hierarchies(procRoot)
	if err != nil {
		return false
	}
	for _, h := range hs {
		if h.Version != cgroup.V2 {
			continue
		}
		data, err := os.ReadFile(filepath.Join(h.Mount, "cgroup.controllers"))
		if err == nil && slices.Contains(strings.Fields(string(data)), "dmem") {
			return true
		}
	}
	return false
}
