package deviceplugin

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wsched/wsched/daemon/api"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// The advertised devices are units of memory, not GPUs: the kubelet counts
// them, the lease decides the GPU. Their IDs are "u0", "u1", …; the IDs the
// kubelet gave a container stay listed while its lease lasts.

// deviceIDs returns the device IDs of one of the plugin's leases; ok is
// false for leases of others.
func deviceIDs(l api.Lease) (ids []string, ok bool) {
	if l.Labels[LabelResource] != ResourceName {
		return nil, false
	}
	if s := l.Labels[LabelDevices]; s != "" {
		ids = strings.Split(s, ",")
	}
	return ids, true
}

// gpuUnits is how many units a GPU offers to Kubernetes: what is usable,
// less foreign memory and leases of others (local clients), whole units
// only. The plugin's own leases stay in it: the kubelet subtracts what it
// allocated itself. Unplaceable GPUs (unhealthy, MIG) offer none.
func gpuUnits(g api.GPU, unit int64) int {
	if !g.Accounting.Placeable {
		return 0
	}
	others := g.Accounting.LeasedBytes
	for _, l := range g.Leases {
		if _, ok := deviceIDs(l); ok {
			others -= l.MemoryBytes
		}
	}
	free := g.Accounting.UsableBytes - g.Accounting.ForeignBytes - others
	if free <= 0 {
		return 0
	}
	return int(free / unit)
}

// deviceList is the list to advertise: the IDs held by the plugin's leases
// (unhealthy when their GPU no longer is placeable), then as many unused
// IDs as the placeable GPUs have units left.
func deviceList(gpus api.GPUs, unit int64) []*pluginapi.Device {
	total, heldUnits := 0, 0
	held := map[string]string{}
	for _, g := range gpus.GPUs {
		total += gpuUnits(g, unit)
		health := pluginapi.Healthy
		if !g.Accounting.Placeable {
			health = pluginapi.Unhealthy
		}
		for _, l := range g.Leases {
			ids, ok := deviceIDs(l)
			if !ok {
				continue
			}
			for _, id := range ids {
				held[id] = health
			}
			if health == pluginapi.Healthy {
				heldUnits += len(ids)
			}
		}
	}
	devs := make([]*pluginapi.Device, 0, len(held)+max(0, total-heldUnits))
	for id, health := range held {
		devs = append(devs, &pluginapi.Device{ID: id, Health: health})
	}
	for i, n := 0, total-heldUnits; n > 0; i++ {
		id := fmt.Sprintf("u%d", i)
		if _, ok := held[id]; !ok {
			devs = append(devs, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
			n--
		}
	}
	slices.SortFunc(devs, func(a, b *pluginapi.Device) int { return strings.Compare(a.ID, b.ID) })
	return devs
}

// healthy counts the healthy devices.
func healthy(devs []*pluginapi.Device) int {
	n := 0
	for _, d := range devs {
		if d.Health == pluginapi.Healthy {
			n++
		}
	}
	return n
}

func sameDevices(a, b []*pluginapi.Device) bool {
	return slices.EqualFunc(a, b, func(x, y *pluginapi.Device) bool { return x.ID == y.ID && x.Health == y.Health })
}
