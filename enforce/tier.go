// Package enforce chooses, per GPU, how wsched holds a lease to its size —
// the enforcement tier — and composes what a holder's environment gains
// for it:
//
//   - nvml-limits: the driver's per-cgroup GPU-memory limits (driver R615+,
//     the kernel's dmem cgroup controller; not on MIG): soft limit = lease,
//     hard limit = lease + borrow, on the holder's cgroup.
//   - mps: an MPS control daemon runs; clients get
//     CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=<uuid>=<lease>.
//   - preload: libwsched_cuda_cap.so (enforce/preload) in LD_PRELOAD caps
//     the CUDA driver's allocations at lease + borrow.
//   - detect: overrun events at the next NVML sample, and the optional kill.
//
// Choose is a pure function of the facts Probe reads (driver version,
// kernel features, MPS pipe, preload library), so tier choice is tested from
// simulated hosts. See docs/enforcement.md.
package enforce

import (
	"fmt"
	"strconv"
	"strings"
)

// Tier is one way of holding a lease to its size, strongest first.
type Tier string

// The tiers.
const (
	NVMLLimits Tier = "nvml-limits"
	MPS        Tier = "mps"
	Preload    Tier = "preload"
	Detect     Tier = "detect"
)

// Auto is the mode that takes the strongest tier the GPU and host allow.
const Auto = "auto"

// Tiers lists the tiers, strongest first.
var Tiers = []Tier{NVMLLimits, MPS, Preload, Detect}

// MinLimitsDriver is the first driver branch with per-cgroup memory limits
// (R615, CUDA 13.4).
const MinLimitsDriver = 615

// Facts are what tier choice depends on, for one GPU on one host.
type Facts struct {
	// Driver is the NVIDIA driver version ("615.43.02"); "" unknown.
	Driver string
	// Dmem: the kernel has the dmem cgroup controller (Linux ≥ 6.14,
	// listed in the v2 root's cgroup.controllers).
	Dmem bool
	// LimitsCall: the NVML library exports the memory-limits call
	// (nvmlDeviceSetMemoryLimits_v1; package nvmllimits calls it through
	// dlsym, go-nvml v0.13 has no binding).
	LimitsCall bool
	// NVMLLib is the NVML library probed for it (and opened to set them).
	NVMLLib string
	// Root: the daemon runs as root, which setting the limits needs.
	Root bool
	// MIG: the GPU is in MIG mode (the driver's limits do not apply).
	MIG bool
	// MPSPipe is the pipe directory of a running MPS control daemon; "" none.
	MPSPipe string
	// MPSOff: [enforcement] mps = "off" (MPS is not used even if it runs).
	MPSOff bool
	// PreloadLib is the allocation-cap library's path; "" not found.
	PreloadLib string
}

// Choice is a tier and why it was taken.
type Choice struct {
	Tier   Tier   `json:"tier"`
	Reason string `json:"reason"`
}

// DriverMajor is the branch of a driver version ("615.43.02" → 615; 0
// when unknown).
func DriverMajor(v string) int {
	major, _, _ := strings.Cut(strings.TrimSpace(v), ".")
	n, err := strconv.Atoi(major)
	if err != nil {
		return 0
	}
	return n
}

// allows reports whether f allows tier t, and why (or why not).
func allows(t Tier, f Facts) (bool, string) {
	switch t {
	case NVMLLimits:
		switch major := DriverMajor(f.Driver); {
		case major < MinLimitsDriver:
			return false, fmt.Sprintf("driver %q is older than R%d", f.Driver, MinLimitsDriver)
		case !f.Dmem:
			return false, "the kernel has no dmem cgroup controller (Linux 6.14+, cgroup v2)"
		case f.MIG:
			return false, "the GPU is in MIG mode"
		case !f.LimitsCall:
			return false, "the NVML library does not export nvmlDeviceSetMemoryLimits_v1"
		case !f.Root:
			return false, "setting NVML memory limits needs root, and the daemon does not run as root"
		}
		return true, fmt.Sprintf("driver %s and the dmem cgroup controller enforce per-cgroup limits", f.Driver)
	case MPS:
		if f.MPSOff {
			return false, `[enforcement] mps = "off"`
		}
		if f.MPSPipe == "" {
			return false, "no MPS control daemon runs"
		}
		return true, "an MPS control daemon runs (pipe " + f.MPSPipe + "): pinned-memory limits per client"
	case Preload:
		if f.PreloadLib == "" {
			return false, "the allocation cap library is not installed"
		}
		return true, f.PreloadLib + " caps the CUDA driver's allocations"
	}
	return true, "overruns are seen at the next NVML sample"
}

// Choose picks the tier for mode (auto or a tier's name) from f: the named
// tier when f allows it, else — and for auto — the strongest one f allows
// at or below it. The reason says why, and why stronger ones were not taken.
func Choose(mode string, f Facts) Choice {
	start := 0
	if mode != Auto {
		for i, t := range Tiers {
			if string(t) == mode {
				start = i
			}
		}
	}
	var not []string
	for _, t := range Tiers[start:] {
		ok, why := allows(t, f)
		if ok {
			if len(not) > 0 {
				why += " (not " + strings.Join(not, "; not ") + ")"
			}
			return Choice{Tier: t, Reason: why}
		}
		not = append(not, string(t)+": "+why)
	}
	return Choice{Tier: Detect, Reason: "no tier allowed"} // unreachable: detect is always allowed
}
