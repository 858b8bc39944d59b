package placement

import (
	"fmt"
	"strconv"
)

// Env is the environment that pins a process to its lease: the GPU by UUID
// (so the process sees exactly one device, as cuda:0), the lease's identity
// and size, and the fraction of the GPU it may use
// (torch.cuda.set_per_process_memory_fraction). CPU leases hide all GPUs.
func Env(l Lease) map[string]string {
	env := map[string]string{
		"WSCHED_LEASE_ID":     l.ID,
		"WSCHED_MEMORY_BYTES": strconv.FormatInt(l.Bytes, 10),
	}
	if l.GPU == CPU || l.GPU == "" {
		env["CUDA_VISIBLE_DEVICES"] = ""
		env["SENSEVOICE_DEVICE"] = "cpu"
		return env
	}
	env["CUDA_VISIBLE_DEVICES"] = l.GPU
	env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
	env["SENSEVOICE_DEVICE"] = "cuda:0"
	if l.GPUTotalBytes > 0 {
		env["WSCHED_MEMORY_FRACTION"] = fmt.Sprintf("%.4f", float64(l.Bytes)/float64(l.GPUTotalBytes))
	}
	return env
}
