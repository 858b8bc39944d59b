package deviceplugin

import (
	"testing"

	"github.com/wsched/wsched/daemon/api"
)

func TestDeviceList(t *testing.T) {
	mine := api.Lease{MemoryBytes: 2 * GiB, Labels: map[string]string{LabelResource: ResourceName, LabelDevices: "u3,u7"}}
	local := api.Lease{MemoryBytes: 3 * GiB}
	gpu := func(placeable bool, usable, foreign int64, leases ...api.Lease) api.GPU {
		var leased int64
		for _, l := range leases {
			leased += l.MemoryBytes
		}
		return api.GPU{Accounting: api.Account{Placeable: placeable, UsableBytes: usable, ForeignBytes: foreign, LeasedBytes: leased}, Leases: leases}
	}
	for _, tc := range []struct {
		name             string
		gpus             []api.GPU
		healthy, devices int
	}{
		{"whole units only", []api.GPU{gpu(true, 10*GiB+GiB/2, 0)}, 10, 10},
		{"foreign memory lowers", []api.GPU{gpu(true, 10*GiB, 3*GiB+1)}, 6, 6},
		{"foreign above usable offers none", []api.GPU{gpu(true, 10*GiB, 11*GiB)}, 0, 0},
		{"unplaceable (MIG, unhealthy) offers none", []api.GPU{gpu(false, 10*GiB, 0), gpu(true, 4*GiB, 0)}, 4, 4},
		{"local leases lower, the plugin's do not", []api.GPU{gpu(true, 10*GiB, 0, mine, local)}, 7, 7},
		{"held IDs of an unplaceable GPU stay, unhealthy", []api.GPU{gpu(false, 10*GiB, 0, mine), gpu(true, 4*GiB, 0)}, 4, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs := deviceList(api.GPUs{GPUs: tc.gpus}, GiB)
			if healthy(devs) != tc.healthy || len(devs) != tc.devices {
				t.Fatalf("healthy %d of %d, want %d of %d", healthy(devs), len(devs), tc.healthy, tc.devices)
			}
			seen := map[string]bool{}
			for _, d := range devs {
				if seen[d.ID] {
					t.Fatalf("duplicate ID %s", d.ID)
				}
				seen[d.ID] = true
			}
			for _, l := range tc.gpus[0].Leases {
				if _, ok := deviceIDs(l); ok && (!seen["u3"] || !seen["u7"]) {
					t.Fatalf("held IDs not listed: %v", devs)
				}
			}
		})
	}
}
