package deviceplugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/enforce/preload"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// HolderName is the holder name of the plugin's leases.
const HolderName = "kubernetes"

// allocate serves one AllocateRequest: a lease per container, all or none.
func (p *Plugin) allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.allocMu.Lock()
	defer p.allocMu.Unlock()
	resp := &pluginapi.AllocateResponse{}
	var granted []string
	for _, cr := range req.GetContainerRequests() {
		car, id, err := p.allocateContainer(ctx, cr.GetDevicesIds())
		if err != nil {
			for _, g := range granted {
				if _, rerr := p.d.Release(ctx, g); rerr != nil {
					p.log.Warn("release after failed allocate", "lease", g, "err", rerr)
				}
			}
			return nil, err
		}
		granted = append(granted, id)
		resp.ContainerResponses = append(resp.ContainerResponses, car)
	}
	return resp, nil
}

// allocateContainer asks the daemon for a lease of len(ids) units on one GPU
// and returns what the container needs to use it, and the lease's ID.
func (p *Plugin) allocateContainer(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, string, error) {
	if len(ids) == 0 {
		return nil, "", fmt.Errorf("allocate: %w: no device IDs", ErrBadRequest)
	}
	ids = slices.Sorted(slices.Values(ids))
	// The kubelet hands out only IDs it considers free; IDs still on a lease
	// belonged to a container that is done (an init container's, say).
	if err := p.releaseOverlapping(ctx, ids); err != nil {
		return nil, "", err
	}
	st, err := p.d.Status(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("allocate: daemon status: %w", err)
	}
	bytes := int64(len(ids)) * p.opts.Unit
	l, err := p.d.Acquire(ctx, api.LeaseRequest{
		MemoryBytes: bytes,
		TTLSeconds:  p.opts.LeaseTTL.Seconds(),
		// The daemon holds the lease on the pod's behalf: a restart of the
		// plugin must not free memory under running pods. The plugin
		// releases it when the pod is gone; the TTL covers a plugin gone.
		Holder: &api.HolderRequest{PID: st.PID, Name: HolderName},
		Labels: map[string]string{LabelResource: ResourceName, LabelDevices: strings.Join(ids, ",")},
	})
	if err != nil {
		if client.IsCode(err, "no_fit") || client.IsCode(err, "too_large") {
			err = fmt.Errorf("%w: %w", ErrNoMemory, err)
		}
		return nil, "", fmt.Errorf("allocate %d units (%d bytes) of %s: %w", len(ids), bytes, ResourceName, err)
	}
	p.log.Info("lease granted", "lease", l.ID, "gpu", l.GPUUUID, "bytes", l.MemoryBytes, "devices", ids)
	return &pluginapi.ContainerAllocateResponse{Envs: containerEnv(l), Devices: p.deviceNodes(l.GPUIndex)}, l.ID, nil
}

// containerEnv is lease l's environment for the container: without the
// preload tier's host variables (the container has neither the library
// nor the daemon's socket), and the GPU for the NVIDIA container runtime,
// which mounts the driver for this GPU only.
func containerEnv(l api.Lease) map[string]string {
	env := preload.ForContainer(l.Env)
	env["NVIDIA_VISIBLE_DEVICES"] = l.GPUUUID
	return env
}

// releaseOverlapping releases the plugin's leases holding any of ids.
func (p *Plugin) releaseOverlapping(ctx context.Context, ids []string) error {
	leases, err := p.d.Leases(ctx)
	if err != nil {
		return fmt.Errorf("allocate: list leases: %w", err)
	}
	for _, l := range leases {
		held, ok := deviceIDs(l)
		if !ok || !slices.ContainsFunc(held, func(id string) bool { return slices.Contains(ids, id) }) {
			continue
		}
		if _, err := p.d.Release(ctx, l.ID); err != nil && !client.IsCode(err, "not_found") {
			return fmt.Errorf("allocate: release lease %s of reused devices: %w", l.ID, err)
		}
		p.log.Info("lease released: its devices were allocated again", "lease", l.ID, "devices", held)
	}
	return nil
}

// deviceNodes are the NVIDIA device nodes a container on GPU index needs:
// the control nodes and the GPU's own (NVML index = minor number on
// ordinary machines), those that exist under DevRoot.
func (p *Plugin) deviceNodes(index int) []*pluginapi.DeviceSpec {
	var out []*pluginapi.DeviceSpec
	for _, name := range []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", fmt.Sprintf("nvidia%d", index)} {
		host := filepath.Join(p.opts.DevRoot, name)
		if _, err := os.Stat(host); err != nil {
			continue
		}
		out = append(out, &pluginapi.DeviceSpec{HostPath: host, ContainerPath: "/dev/" + name, Permissions: "rw"})
	}
	return out
}
