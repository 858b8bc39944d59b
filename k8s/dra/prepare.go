package dra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// draServer is the driver's gRPC face to the kubelet.
type draServer struct {
	drapb.UnimplementedDRAPluginServer
	d *Driver
}

// NodePrepareResources prepares each claim; a claim that fails carries its
// error (the kubelet retries it), the others are prepared.
func (s draServer) NodePrepareResources(ctx context.Context, req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
	resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
	for _, c := range req.GetClaims() {
		devs, err := s.d.prepare(ctx, c)
		if err != nil {
			s.d.log.Warn("prepare failed", "claim", c.GetNamespace()+"/"+c.GetName(), "err", err)
			resp.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{Error: err.Error()}
			continue
		}
		resp.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{Devices: devs}
	}
	return resp, nil
}

// NodeUnprepareResources releases each claim's leases and CDI spec.
func (s draServer) NodeUnprepareResources(ctx context.Context, req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
	resp := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
	for _, c := range req.GetClaims() {
		r := &drapb.NodeUnprepareResourceResponse{}
		if err := s.d.unprepare(ctx, c.GetUid()); err != nil {
			s.d.log.Warn("unprepare failed", "claim", c.GetNamespace()+"/"+c.GetName(), "err", err)
			r.Error = err.Error()
		}
		resp.Claims[c.GetUid()] = r
	}
	return resp, nil
}

// prepare takes a lease per device allocated to the claim by this driver
// (again after a restart: a lease already there for the claim's request is
// kept) and writes the claim's CDI spec.
func (d *Driver) prepare(ctx context.Context, c *drapb.Claim) ([]*drapb.Device, error) {
	results, err := d.opts.Claims.Allocation(ctx, c.GetNamespace(), c.GetName(), c.GetUid())
	if err != nil {
		return nil, fmt.Errorf("prepare claim %s/%s: %w", c.GetNamespace(), c.GetName(), err)
	}
	leases, err := d.d.Leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("prepare claim %s: list leases: %w", c.GetUid(), err)
	}
	spec := cdiSpec{Version: "0.6.0", Kind: CDIKind}
	var out []*drapb.Device
	for _, r := range results {
		if r.Driver != DriverName {
			continue
		}
		l, err := d.leaseFor(ctx, c.GetUid(), r, leases)
		if err != nil {
			return nil, errors.Join(err, d.unprepare(ctx, c.GetUid()))
		}
		name := c.GetUid() + "-" + r.Request
		spec.Devices = append(spec.Devices, cdiDevice{Name: name, Edits: cdiEdits{Env: envList(l)}})
		dev := &drapb.Device{RequestNames: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device, CdiDeviceIds: []string{CDIKind + "=" + name}}
		if r.ShareID != "" {
			dev.ShareId = &r.ShareID
		}
		out = append(out, dev)
	}
	if err := d.writeSpec(c.GetUid(), spec); err != nil {
		return nil, errors.Join(err, d.unprepare(ctx, c.GetUid()))
	}
	return out, nil
}

// leaseFor returns the claim's lease for result r: the one already held,
// or a new one of r's memory on r's GPU.
func (d *Driver) leaseFor(ctx context.Context, uid string, r Result, leases []api.Lease) (api.Lease, error) {
	for _, l := range leases {
		if l.Labels[LabelClaim] == uid && l.Labels[LabelRequest] == r.Request && l.State == "granted" {
			return l, nil
		}
	}
	var index int
	if _, err := fmt.Sscanf(r.Device, "gpu-%d", &index); err != nil || r.MemoryBytes <= 0 {
		return api.Lease{}, fmt.Errorf("prepare claim %s: %w: device %q, memory %d", uid, ErrBadRequest, r.Device, r.MemoryBytes)
	}
	st, err := d.d.Status(ctx)
	if err != nil {
		return api.Lease{}, fmt.Errorf("prepare claim %s: daemon status: %w", uid, err)
	}
	l, err := d.d.Acquire(ctx, api.LeaseRequest{
		MemoryBytes: r.MemoryBytes,
		Device:      fmt.Sprintf("cuda:%d", index),
		TTLSeconds:  d.opts.LeaseTTL.Seconds(),
		// Held by the daemon on the pod's behalf, as the device plugin's.
		Holder: &api.HolderRequest{PID: st.PID, Name: HolderName},
		Labels: map[string]string{LabelClaim: uid, LabelRequest: r.Request, LabelDevice: r.Device},
	})
	if err != nil {
		return api.Lease{}, fmt.Errorf("prepare claim %s: lease %d bytes on %s: %w", uid, r.MemoryBytes, r.Device, err)
	}
	d.log.Info("lease granted", "claim", uid, "lease", l.ID, "gpu", l.GPUUUID, "bytes", l.MemoryBytes)
	return l, nil
}

// unprepare releases the claim's leases and removes its CDI spec.
func (d *Driver) unprepare(ctx context.Context, uid string) error {
	leases, err := d.d.Leases(ctx)
	if err != nil {
		return fmt.Errorf("unprepare claim %s: list leases: %w", uid, err)
	}
	var errs []error
	for _, l := range leases {
		if l.Labels[LabelClaim] != uid {
			continue
		}
		if _, err := d.d.Release(ctx, l.ID); err != nil && !client.IsCode(err, "not_found") {
			errs = append(errs, fmt.Errorf("unprepare claim %s: release %s: %w", uid, l.ID, err))
			continue
		}
		d.log.Info("lease released", "claim", uid, "lease", l.ID)
	}
	if err := os.Remove(d.specPath(uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("unprepare claim %s: %w", uid, err))
	}
	return errors.Join(errs...)
}

// envList is the lease's environment for the container, as CDI has it.
func envList(l api.Lease) []string {
	env := maps.Clone(l.Env)
	if env == nil {
		env = map[string]string{}
	}
	env["NVIDIA_VISIBLE_DEVICES"] = l.GPUUUID
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// cdiSpec is a CDI spec file (github.com/cncf-tags/container-device-interface, v0.6.0).
type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name  string   `json:"name"`
	Edits cdiEdits `json:"containerEdits"`
}

type cdiEdits struct {
	Env []string `json:"env,omitempty"`
}

func (d *Driver) specPath(uid string) string {
	return filepath.Join(d.opts.CDIDir, "wsched.io-claim_"+uid+".json")
}

// writeSpec writes the claim's CDI spec atomically (the runtime may read it
// at any time).
func (d *Driver) writeSpec(uid string, spec cdiSpec) error {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("write CDI spec of claim %s: %w", uid, err)
	}
	if err := os.MkdirAll(d.opts.CDIDir, 0o755); err != nil {
		return fmt.Errorf("write CDI spec of claim %s: %w", uid, err)
	}
	tmp := d.specPath(uid) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write CDI spec of claim %s: %w", uid, err)
	}
	if err := os.Rename(tmp, d.specPath(uid)); err != nil {
		return fmt.Errorf("write CDI spec of claim %s: %w", uid, err)
	}
	return nil
}
