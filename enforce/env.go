package enforce

import (
	"maps"
	"strconv"

	"github.com/wsched/wsched/enforce/preload"
	"github.com/wsched/wsched/placement"
)

// MPSEnv is the environment an MPS client gains: its pinned device memory
// limited to the lease on its GPU (named by UUID; whole MiB, rounded up).
func MPSEnv(uuid string, leaseBytes int64, pipe string) map[string]string {
	mib := (leaseBytes + 1<<20 - 1) >> 20
	env := map[string]string{"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": uuid + "=" + strconv.FormatInt(mib, 10) + "M"}
	if pipe != "" {
		env["CUDA_MPS_PIPE_DIRECTORY"] = pipe
	}
	return env
}

// Enforcer holds the tier chosen for each GPU and composes a holder's
// environment for it. It is built once at start and read-only after.
type Enforcer struct {
	byGPU    map[string]Choice // by UUID
	fallback Choice            // for a GPU not known at start
	facts    Facts
	borrow   int64
	socket   string
}

// NewEnforcer chooses the tier for each GPU (by UUID, with whether it is in
// MIG mode) under mode from the host's facts; borrow is [enforcement]
// borrow and socket the daemon's, which the preload library reports to.
func NewEnforcer(mode string, host Facts, gpus map[string]bool, borrow int64, socket string) *Enforcer {
	e := &Enforcer{byGPU: map[string]Choice{}, facts: host, borrow: borrow, socket: socket}
	for uuid, mig := range gpus {
		f := host
		f.MIG = mig
		e.byGPU[uuid] = Choose(mode, f)
	}
	e.fallback = Choose(mode, host)
	return e
}

// For is the choice for the GPU with uuid.
func (e *Enforcer) For(uuid string) Choice {
	if c, ok := e.byGPU[uuid]; ok {
		return c
	}
	return e.fallback
}

// Env is what the environment of lease l's holder gains for its GPU's
// tier (nil for CPU leases, nvml-limits and detect).
func (e *Enforcer) Env(l placement.Lease) map[string]string {
	if e == nil || l.GPU == "" || l.GPU == placement.CPU {
		return nil
	}
	switch e.For(l.GPU).Tier {
	case Preload:
		return preload.Env(e.facts.PreloadLib, "", l.Bytes, e.borrow, e.socket)
	case MPS:
		return MPSEnv(l.GPU, l.Bytes, e.facts.MPSPipe)
	}
	return nil
}

// Choices is every GPU's choice, by UUID.
func (e *Enforcer) Choices() map[string]Choice { return maps.Clone(e.byGPU) }
