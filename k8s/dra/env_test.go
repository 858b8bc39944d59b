package dra

import (
	"slices"
	"testing"

	"github.com/wsched/wsched/daemon/api"
)

// A lease on a GPU with the preload tier carries the cap's host files
// (LD_PRELOAD of /usr/lib/wsched/…, the daemon's socket): the CDI spec's
// container edits leave them out (the container has neither).
func TestEnvListWithoutHostPreload(t *testing.T) {
	l := api.Lease{GPUUUID: "GPU-1", Env: map[string]string{"WSCHED_LEASE_ID": "l-1",
		"LD_PRELOAD": "/usr/lib/wsched/libwsched_cuda_cap.so", "WSCHED_CUDA_LIMIT_BYTES": "4294967296", "WSCHED_SOCKET": "/run/wsched/wsched.sock"}}
	want := []string{"NVIDIA_VISIBLE_DEVICES=GPU-1", "WSCHED_LEASE_ID=l-1"}
	if got := envList(l); !slices.Equal(got, want) {
		t.Errorf("CDI env %q, want %q", got, want)
	}
}
