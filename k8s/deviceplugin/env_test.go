package deviceplugin

import (
	"maps"
	"testing"

	"github.com/wsched/wsched/daemon/api"
)

// A lease on a GPU with the preload tier carries the cap's host files
// (LD_PRELOAD of /usr/lib/wsched/…, the daemon's socket): the container
// has neither, so it gets the lease's other variables only.
func TestContainerEnvWithoutHostPreload(t *testing.T) {
	l := api.Lease{GPUUUID: "GPU-1", Env: map[string]string{"WSCHED_LEASE_ID": "l-1", "CUDA_VISIBLE_DEVICES": "GPU-1",
		"LD_PRELOAD": "/usr/lib/wsched/libwsched_cuda_cap.so", "WSCHED_CUDA_LIMIT_BYTES": "4294967296", "WSCHED_SOCKET": "/run/wsched/wsched.sock"}}
	want := map[string]string{"WSCHED_LEASE_ID": "l-1", "CUDA_VISIBLE_DEVICES": "GPU-1", "NVIDIA_VISIBLE_DEVICES": "GPU-1"}
	if got := containerEnv(l); !maps.Equal(got, want) {
		t.Errorf("container env %v, want %v", got, want)
	}
	if l.Env["LD_PRELOAD"] == "" {
		t.Error("the lease's own environment was changed")
	}
}
