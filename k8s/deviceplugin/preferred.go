package deviceplugin

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/wsched/wsched/daemon/api"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// preferred answers GetPreferredAllocation. The units are interchangeable
// (the lease decides the GPU), so which IDs matter little: the ones the
// kubelet must include, then the lowest-numbered available ones. What
// matters is the GPU: a container's units must all be on one. When no GPU
// holds the whole request the answer is an error, so that the kubelet
// refuses the pod at admission, with the reason, before any Allocate.
func (p *Plugin) preferred(req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p.mu.Lock()
	gpus := p.gpus
	p.mu.Unlock()
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.GetContainerRequests() {
		size := int(cr.GetAllocationSize())
		if best, room := mostRoom(gpus, p.opts.Unit); room < size {
			return nil, fmt.Errorf("preferred allocation of %d units of %s: %w (the most on one GPU: %d units, GPU %d)",
				size, ResourceName, ErrNoMemory, room, best)
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{
			DeviceIDs: pickIDs(cr.GetMustIncludeDeviceIDs(), cr.GetAvailableDeviceIDs(), size),
		})
	}
	return resp, nil
}

// mostRoom is the GPU with the most whole units a new lease can take (what
// the daemon calls available, less what it holds for queued requests) and
// that many units; -1 and 0 when no GPU is placeable.
func mostRoom(gpus api.GPUs, unit int64) (index, units int) {
	index = -1
	for _, g := range gpus.GPUs {
		if !g.Accounting.Placeable {
			continue
		}
		free := g.Accounting.AvailableOrZero() - g.HeldBytes
		if u := int(max(free, 0) / unit); index < 0 || u > units {
			index, units = g.Index, u
		}
	}
	return index, units
}

// pickIDs returns size IDs: all of must, then the lowest-numbered of
// available (u2 before u10) not already in.
func pickIDs(must, available []string, size int) []string {
	out := slices.Clone(must)
	rest := slices.DeleteFunc(slices.Clone(available), func(id string) bool { return slices.Contains(must, id) })
	slices.SortFunc(rest, func(a, b string) int { return cmp.Or(cmp.Compare(unitNumber(a), unitNumber(b)), strings.Compare(a, b)) })
	for _, id := range rest {
		if len(out) >= size {
			break
		}
		out = append(out, id)
	}
	return out
}

// unitNumber is N of an ID "uN", or -1.
func unitNumber(id string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "u"))
	if err != nil || !strings.HasPrefix(id, "u") {
		return -1
	}
	return n
}
