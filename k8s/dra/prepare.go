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
	"github.com/wsched/wsched/enforce/preload"
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
	err := s.d.call(ctx, func(ctx context.Context) {
		for _, c := range req.GetClaims() {
			devs, err := s.d.prepare(ctx, c)
			if err != nil {
				s.d.log.Warn("prepare failed", "claim", c.GetNamespace()+"/"+c.GetName(), "err", err)
				resp.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{Error: err.Error()}
				continue
			}
			resp.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{Devices: devs}
		}
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// NodeUnprepareResources releases each claim's leases and CDI spec.
func (s draServer) NodeUnprepareResources(ctx context.Context, req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
	resp := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
	err := s.d.call(ctx, func(ctx context.Context) {
		for _, c := range req.GetClaims() {
			r := &drapb.NodeUnprepareResourceResponse{}
			if err := s.d.unprepare(ctx, c.GetUid()); err != nil {
				s.d.log.Warn("unprepare failed", "claim", c.GetNamespace()+"/"+c.GetName(), "err", err)
				r.Error = err.Error()
			}
			resp.Claims[c.GetUid()] = r
		}
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// prepare prepares one claim. A claim the checkpoint records, whose leases
// the daemon still grants, is answered from the record (again after a
// restart of the driver: same leases, no API call); otherwise its
// allocation is read from the API server and leases taken (leases already
// there for it are adopted). A failure undoes a claim not prepared before;
// a prepared one (its pods may run) keeps what it has.
func (d *Driver) prepare(ctx context.Context, c *drapb.Claim) ([]*drapb.Device, error) {
	uid := c.GetUid()
	leases, err := d.d.Leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("prepare claim %s: list leases: %w", uid, err)
	}
	pc, recorded := d.claims[uid]
	if recorded && held(pc, leases) {
		return drapbDevices(uid, pc.Results), nil
	}
	results, err := d.opts.Claims.Allocation(ctx, c.GetNamespace(), c.GetName(), uid)
	if err != nil {
		return nil, fmt.Errorf("prepare claim %s/%s: %w", c.GetNamespace(), c.GetName(), err)
	}
	devs, err := d.prepareResults(ctx, Claim{UID: uid, Namespace: c.GetNamespace(), Name: c.GetName(), Results: results}, leases)
	if err != nil && !recorded {
		return nil, errors.Join(err, d.unprepare(ctx, uid))
	}
	return devs, err
}

// prepareResults takes (or adopts) a lease per result of this driver on
// this node, writes the claim's CDI spec and records the claim in the
// checkpoint. On error the caller undoes what was done.
func (d *Driver) prepareResults(ctx context.Context, c Claim, leases []api.Lease) ([]*drapb.Device, error) {
	var mine []Result
	for _, r := range c.Results {
		if r.Driver == DriverName && r.Pool == d.opts.Node {
			mine = append(mine, r)
		}
	}
	spec := cdiSpec{Version: "0.6.0", Kind: CDIKind}
	pc := preparedClaim{Namespace: c.Namespace, Name: c.Name, Results: mine}
	for i, r := range mine {
		l, err := d.leaseFor(ctx, c.UID, r, leases)
		if err != nil {
			return nil, err
		}
		pc.Leases = append(pc.Leases, l.ID)
		spec.Devices = append(spec.Devices, cdiDevice{Name: cdiName(c.UID, mine, i), Edits: cdiEdits{Env: envList(l)}})
	}
	if err := d.writeSpec(c.UID, spec); err != nil {
		return nil, err
	}
	if err := d.record(c.UID, &pc); err != nil {
		return nil, err
	}
	return drapbDevices(c.UID, mine), nil
}

// record sets (pc != nil) or drops the claim uid in the checkpoint.
func (d *Driver) record(uid string, pc *preparedClaim) error {
	claims := maps.Clone(d.claims)
	if claims == nil {
		claims = map[string]preparedClaim{}
	}
	if pc != nil {
		claims[uid] = *pc
	} else {
		if _, ok := claims[uid]; !ok {
			return nil
		}
		delete(claims, uid)
	}
	if err := saveCheckpoint(d.checkpointPath(), claims); err != nil {
		return fmt.Errorf("claim %s: %w", uid, err)
	}
	d.claims = claims
	return nil
}

// held tells whether the daemon still grants every lease of pc.
func held(pc preparedClaim, leases []api.Lease) bool {
	for _, id := range pc.Leases {
		if !slices.ContainsFunc(leases, func(l api.Lease) bool { return l.ID == id && l.State == "granted" }) {
			return false
		}
	}
	return true
}

// cdiName is the CDI device name of results[i]: <uid>-<request>, with
// "-<n>" for the n-th further result of the same request.
func cdiName(uid string, results []Result, i int) string {
	n := 0
	for _, r := range results[:i] {
		if r.Request == results[i].Request {
			n++
		}
	}
	if n == 0 {
		return uid + "-" + results[i].Request
	}
	return fmt.Sprintf("%s-%s-%d", uid, results[i].Request, n)
}

// drapbDevices is the kubelet's answer for the prepared results.
func drapbDevices(uid string, results []Result) []*drapb.Device {
	out := []*drapb.Device{}
	for i, r := range results {
		dev := &drapb.Device{RequestNames: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device,
			CdiDeviceIds: []string{CDIKind + "=" + cdiName(uid, results, i)}}
		if r.ShareID != "" {
			dev.ShareId = &r.ShareID
		}
		out = append(out, dev)
	}
	return out
}

// leaseFor returns the claim's lease for result r: the one already held
// (same request, device and share), or a new one of r's memory on r's GPU.
func (d *Driver) leaseFor(ctx context.Context, uid string, r Result, leases []api.Lease) (api.Lease, error) {
	for _, l := range leases {
		if l.Labels[LabelClaim] == uid && l.Labels[LabelRequest] == r.Request && l.Labels[LabelDevice] == r.Device &&
			l.Labels[LabelShare] == r.ShareID && l.State == "granted" {
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
	labels := map[string]string{LabelClaim: uid, LabelRequest: r.Request, LabelDevice: r.Device}
	if r.ShareID != "" {
		labels[LabelShare] = r.ShareID
	}
	l, err := d.d.Acquire(ctx, api.LeaseRequest{
		MemoryBytes: r.MemoryBytes,
		Device:      fmt.Sprintf("cuda:%d", index),
		TTLSeconds:  d.opts.LeaseTTL.Seconds(),
		// Held by the daemon on the pod's behalf, as the device plugin's.
		Holder: &api.HolderRequest{PID: st.PID, Name: HolderName},
		Labels: labels,
	})
	if err != nil {
		return api.Lease{}, fmt.Errorf("prepare claim %s: lease %d bytes on %s: %w", uid, r.MemoryBytes, r.Device, err)
	}
	d.log.Info("lease granted", "claim", uid, "lease", l.ID, "gpu", l.GPUUUID, "bytes", l.MemoryBytes)
	return l, nil
}

// unprepare releases the claim's leases, removes its CDI spec and drops it
// from the checkpoint; a claim already gone is no error.
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
	if len(errs) == 0 { // else the record stays: the kubelet retries
		if err := d.record(uid, nil); err != nil {
			errs = append(errs, fmt.Errorf("unprepare: %w", err))
		}
	}
	return errors.Join(errs...)
}

// envList is the lease's environment for the container, as CDI has it:
// without the preload tier's host variables (the container has neither
// the library nor the daemon's socket).
func envList(l api.Lease) []string {
	env := preload.ForContainer(l.Env)
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
	if err == nil {
		err = writeFileSync(d.specPath(uid), data, 0o644)
	}
	if err != nil {
		return fmt.Errorf("write CDI spec of claim %s: %w", uid, err)
	}
	return nil
}
