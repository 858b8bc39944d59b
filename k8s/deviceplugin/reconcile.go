package deviceplugin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// podDevices asks the kubelet's PodResources API which of the plugin's
// device IDs running pods' containers hold.
func (p *Plugin) podDevices(ctx context.Context) (map[string]bool, error) {
	conn, err := grpc.NewClient("unix://"+p.opts.PodResources, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial pod resources %s: %w", p.opts.PodResources, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := podresourcesapi.NewPodResourcesListerClient(conn).List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("list pod resources at %s: %w", p.opts.PodResources, err)
	}
	inUse := map[string]bool{}
	for _, pod := range resp.GetPodResources() {
		for _, c := range pod.GetContainers() {
			for _, d := range c.GetDevices() {
				if d.GetResourceName() != ResourceName {
					continue
				}
				for _, id := range d.GetDeviceIds() {
					inUse[id] = true
				}
			}
		}
	}
	return inUse, nil
}

// reconcile releases the leases of pods that are gone, renews the others,
// and counts their containers' GPU processes against them.
func (p *Plugin) reconcile(ctx context.Context) error {
	inUse, err := p.podDevices(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	leases, err := p.d.Leases(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: list leases: %w", err)
	}
	live := map[string]api.Lease{}
	for _, l := range leases {
		ids, ok := deviceIDs(l)
		if !ok {
			continue
		}
		if slices.ContainsFunc(ids, func(id string) bool { return inUse[id] }) || (l.Granted != nil && time.Since(*l.Granted) < p.opts.Grace) {
			if _, err := p.d.Renew(ctx, l.ID, p.opts.LeaseTTL); err != nil {
				p.log.Warn("renew failed", "lease", l.ID, "err", err)
			}
			live[l.ID] = l
			continue
		}
		if _, err := p.d.Release(ctx, l.ID); err != nil && !client.IsCode(err, "not_found") {
			return fmt.Errorf("reconcile: release lease %s: %w", l.ID, err)
		}
		p.log.Info("lease released: its pod is gone", "lease", l.ID, "devices", ids)
	}
	p.attribute(ctx, live)
	return nil
}

// attribute counts GPU processes that no lease claims against the plugin's
// lease named by their WSCHED_LEASE_ID (which Allocate put into the
// container's environment): the daemon cannot find them by parentage, as
// the container runtime, not a lease holder, starts them.
func (p *Plugin) attribute(ctx context.Context, live map[string]api.Lease) {
	if len(live) == 0 {
		return
	}
	p.mu.Lock()
	gpus := p.gpus
	p.mu.Unlock()
	for _, g := range gpus.GPUs {
		claimed := map[int]bool{}
		for _, l := range g.Leases {
			claimed[l.Holder.PID] = true
			for _, pid := range l.PIDs {
				claimed[pid] = true
			}
		}
		for _, proc := range g.Processes {
			if claimed[proc.PID] {
				continue
			}
			id := leaseOf(p.opts.ProcRoot, proc.PID)
			if l, ok := live[id]; !ok || l.GPUUUID != g.UUID || slices.Contains(l.PIDs, proc.PID) {
				continue
			}
			if _, err := p.d.AddPID(ctx, id, proc.PID); err != nil {
				p.log.Warn("attribute process failed", "lease", id, "pid", proc.PID, "err", err)
				continue
			}
			p.log.Info("process attributed", "lease", id, "pid", proc.PID, "gpu", g.UUID)
		}
	}
}

// leaseOf reads WSCHED_LEASE_ID from a process's environment ("" when it
// has none or cannot be read).
func leaseOf(procRoot string, pid int) string {
	data, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "environ"))
	if err != nil {
		return ""
	}
	for kv := range bytes.SplitSeq(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("WSCHED_LEASE_ID=")); ok {
			return string(v)
		}
	}
	return ""
}
