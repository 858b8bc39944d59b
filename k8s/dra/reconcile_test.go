package dra

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/wsched/wsched/daemon/api"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

func gpuResult(device string, bytes int64) Result {
	return Result{Request: "gpu", Driver: DriverName, Pool: "node1", Device: device, MemoryBytes: bytes}
}

func kclaim(uid string) *drapb.Claim {
	return &drapb.Claim{Namespace: "default", Name: "c-" + uid, Uid: uid}
}

// prepareOne calls NodePrepareResources for uid and returns its answer.
func (r *rig) prepareOne(t *testing.T, uid string) *drapb.NodePrepareResourceResponse {
	t.Helper()
	resp, err := r.plugin.NodePrepareResources(context.Background(), &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{kclaim(uid)}})
	if err != nil {
		t.Fatalf("prepare %s: %v", uid, err)
	}
	return resp.Claims[uid]
}

// leasesOf returns the granted leases labelled with claim uid.
func (r *rig) leasesOf(t *testing.T, uid string) []api.Lease {
	t.Helper()
	ls, err := r.c.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(ls, func(l api.Lease) bool { return l.Labels[LabelClaim] != uid || l.State != "granted" })
}

// leaseID is the ID of the one lease of claim uid ("" when it has none).
func (r *rig) leaseID(t *testing.T, uid string) string {
	t.Helper()
	ls := r.leasesOf(t, uid)
	switch len(ls) {
	case 0:
		return ""
	case 1:
		return ls[0].ID
	}
	t.Fatalf("claim %s: %d leases, want at most 1: %+v", uid, len(ls), ls)
	return ""
}

// checkpointed returns the UIDs in the driver's checkpoint file.
func (r *rig) checkpointed(t *testing.T) []string {
	t.Helper()
	claims, err := loadCheckpoint(filepath.Join(r.dir, "plugin", CheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for uid := range claims {
		out = append(out, uid)
	}
	slices.Sort(out)
	return out
}

func (r *rig) spec(uid string) string { return filepath.Join(r.cdi, "wsched.io-claim_"+uid+".json") }

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// TestRestartReconciles: the driver prepares four claims and is killed;
// meanwhile one claim is deleted, one is no longer reserved for a pod (its
// pod gone), one loses its lease (released by hand), and a stale CDI spec
// appears. The restarted driver does nothing while the API server cannot
// list claims; once it can, the deleted and unreserved claims' leases and
// specs are gone, the kept claim has the same lease, the claim whose lease
// was lost has a new one and a spec that names it, the stale spec is gone.
// NodePrepareResources of the kept claim answers from the checkpoint (same
// lease, no API call), NodeUnprepareResources of the deleted one succeeds.
func TestRestartReconciles(t *testing.T) {
	r := newRig(t)
	r.start(t, r.c)
	ctx := context.Background()
	r.api.put("keep", gpuResult("gpu-3", 4*GiB))
	r.api.put("gone", gpuResult("gpu-3", 2*GiB))
	r.api.put("unres", gpuResult("gpu-5", 2*GiB))
	r.api.put("lost", gpuResult("gpu-6", 3*GiB))
	ids := map[string]string{}
	for _, uid := range []string{"keep", "gone", "unres", "lost"} {
		if res := r.prepareOne(t, uid); res.GetError() != "" {
			t.Fatalf("prepare %s: %s", uid, res.GetError())
		}
		if ids[uid] = r.leaseID(t, uid); ids[uid] == "" || !exists(r.spec(uid)) {
			t.Fatalf("claim %s: lease %q, spec there %v", uid, ids[uid], exists(r.spec(uid)))
		}
	}
	keepDevs := r.prepareOne(t, "keep").Devices

	r.stop() // killed: no unprepare, nothing cleaned up
	r.api.edit(func(cs map[string]fakeClaim) {
		delete(cs, "gone")
		c := cs["unres"]
		c.reserved = false
		cs["unres"] = c
	})
	if _, err := r.c.Release(ctx, ids["lost"]); err != nil {
		t.Fatal(err)
	}
	stale := r.spec("stale")
	if err := os.WriteFile(stale, []byte(`{"cdiVersion":"0.6.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.spec("keep")+".tmp", nil, 0o644); err != nil {
		t.Fatal(err)
	}

	// The API server does not answer yet: nothing may change.
	r.api.edit(func(map[string]fakeClaim) { r.api.listErr = errors.New("apiserver down") })
	lists, _ := r.api.counts()
	r.start(t, r.c)
	waitFor(t, "three failed lists", func() bool { n, _ := r.api.counts(); return n >= lists+3 })
	if r.leaseID(t, "gone") != ids["gone"] || r.leaseID(t, "unres") != ids["unres"] || !exists(r.spec("gone")) {
		t.Fatalf("released without the API server's word")
	}
	r.api.edit(func(map[string]fakeClaim) { r.api.listErr = nil })
	waitFor(t, "leases of claims gone while down released", func() bool {
		return r.leaseID(t, "gone") == "" && r.leaseID(t, "unres") == ""
	})
	waitFor(t, "the lost lease taken again", func() bool { return r.leaseID(t, "lost") != "" })
	waitFor(t, "the stale spec removed (reconciliation's last step)", func() bool { return !exists(stale) })

	if got := r.leaseID(t, "keep"); got != ids["keep"] {
		t.Errorf("keep: lease %q after restart, want %q (adopted)", got, ids["keep"])
	}
	newLost := r.leaseID(t, "lost")
	if newLost == ids["lost"] {
		t.Errorf("lost: the released lease %s is still listed", newLost)
	}
	var spec cdiSpec
	if data, err := os.ReadFile(r.spec("lost")); err != nil || json.Unmarshal(data, &spec) != nil ||
		len(spec.Devices) != 1 || !slices.Contains(spec.Devices[0].Edits.Env, "WSCHED_LEASE_ID="+newLost) {
		t.Errorf("lost: CDI spec %+v (%v), want the new lease %s", spec, err, newLost)
	}
	for _, f := range []string{r.spec("gone"), r.spec("unres"), stale, r.spec("keep") + ".tmp"} {
		if exists(f) {
			t.Errorf("%s left", filepath.Base(f))
		}
	}
	if !exists(r.spec("keep")) {
		t.Errorf("keep: CDI spec removed")
	}
	if got := r.checkpointed(t); !slices.Equal(got, []string{"keep", "lost"}) {
		t.Errorf("checkpoint %v, want [keep lost]", got)
	}

	_, gets := r.api.counts()
	again := r.prepareOne(t, "keep")
	if _, gets2 := r.api.counts(); again.GetError() != "" || r.leaseID(t, "keep") != ids["keep"] || gets2 != gets ||
		len(again.Devices) != 1 || again.Devices[0].CdiDeviceIds[0] != keepDevs[0].CdiDeviceIds[0] {
		t.Errorf("prepare keep after restart: %v, lease %s (want %s), API reads %d → %d",
			again, r.leaseID(t, "keep"), ids["keep"], gets, gets2)
	}
	un, err := r.plugin.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{kclaim("gone"), kclaim("keep")}})
	if err != nil || un.Claims["gone"].GetError() != "" || un.Claims["keep"].GetError() != "" {
		t.Fatalf("unprepare after restart: %v, %v", un, err)
	}
	if r.leaseID(t, "keep") != "" || exists(r.spec("keep")) || !slices.Equal(r.checkpointed(t), []string{"lost"}) {
		t.Errorf("keep not unprepared: lease %q, checkpoint %v", r.leaseID(t, "keep"), r.checkpointed(t))
	}
}

// dyingDaemon is the daemon as a driver that dies right after a lease is
// granted sees it: the grant happens, its answer and every later one are
// lost (the driver's process is gone before it records anything).
type dyingDaemon struct {
	Daemon
	dead atomic.Bool
}

var errDead = errors.New("the driver died")

func (d *dyingDaemon) Acquire(ctx context.Context, req api.LeaseRequest) (api.Lease, error) {
	if d.dead.Load() {
		return api.Lease{}, errDead
	}
	_, err := d.Daemon.Acquire(ctx, req)
	d.dead.Store(true)
	return api.Lease{}, errors.Join(err, errDead)
}

func (d *dyingDaemon) Leases(ctx context.Context) ([]api.Lease, error) {
	if d.dead.Load() {
		return nil, errDead
	}
	return d.Daemon.Leases(ctx)
}

func (d *dyingDaemon) Release(ctx context.Context, id string) (api.Lease, error) {
	if d.dead.Load() {
		return api.Lease{}, errDead
	}
	return d.Daemon.Release(ctx, id)
}

// TestCrashMidPrepare: the driver dies between the daemon granting a
// claim's lease and recording the claim (no CDI spec, no checkpoint, the
// kubelet got an error). A claim deleted while the driver was down loses
// that lease at the next start; a claim still live keeps it — adopted by
// the reconciliation and by the kubelet's retried NodePrepareResources,
// never taken twice.
func TestCrashMidPrepare(t *testing.T) {
	r := newRig(t)
	r.api.put("deleted", gpuResult("gpu-2", 2*GiB))
	r.api.put("live", gpuResult("gpu-2", 3*GiB))

	r.start(t, &dyingDaemon{Daemon: r.c})
	if res := r.prepareOne(t, "deleted"); res.GetError() == "" {
		t.Fatal("prepare through a dying driver succeeded")
	}
	orphan := r.leaseID(t, "deleted")
	if orphan == "" || exists(r.spec("deleted")) || len(r.checkpointed(t)) != 0 {
		t.Fatalf("after the crash: lease %q, spec %v, checkpoint %v", orphan, exists(r.spec("deleted")), r.checkpointed(t))
	}
	r.stop()
	r.api.edit(func(cs map[string]fakeClaim) { delete(cs, "deleted") })

	r.start(t, &dyingDaemon{Daemon: r.c})
	waitFor(t, "the orphan lease released", func() bool { return r.leaseID(t, "deleted") == "" })
	if res := r.prepareOne(t, "live"); res.GetError() == "" {
		t.Fatal("prepare through a dying driver succeeded")
	}
	granted := r.leaseID(t, "live")
	if granted == "" {
		t.Fatal("no lease granted before the crash")
	}
	r.stop()

	r.start(t, r.c)
	waitFor(t, "the live claim adopted", func() bool { return slices.Equal(r.checkpointed(t), []string{"live"}) })
	res := r.prepareOne(t, "live") // the kubelet retries the failed prepare
	if res.GetError() != "" || r.leaseID(t, "live") != granted || !exists(r.spec("live")) {
		t.Fatalf("prepare after restart: %v, lease %q, want %q", res, r.leaseID(t, "live"), granted)
	}
}

// TestBadCheckpointSetAside: a corrupt checkpoint is moved aside, the
// driver starts, and the leases' labels still let it adopt the live claim.
func TestBadCheckpointSetAside(t *testing.T) {
	r := newRig(t)
	r.api.put("c1", gpuResult("gpu-3", 2*GiB))
	r.start(t, r.c)
	if res := r.prepareOne(t, "c1"); res.GetError() != "" {
		t.Fatal(res.GetError())
	}
	id := r.leaseID(t, "c1")
	r.stop()
	cp := filepath.Join(r.dir, "plugin", CheckpointFile)
	if err := os.WriteFile(cp, []byte(`{"version":1,"claims":{},"checksum":"00"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r.start(t, r.c)
	waitFor(t, "c1 adopted again", func() bool { return slices.Equal(r.checkpointed(t), []string{"c1"}) })
	if !exists(cp+".bad") || r.leaseID(t, "c1") != id {
		t.Errorf("bad checkpoint kept aside %v, lease %q want %q", exists(cp+".bad"), r.leaseID(t, "c1"), id)
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	in := map[string]preparedClaim{"u1": {Namespace: "ns", Name: "n", Results: []Result{gpuResult("gpu-1", GiB)}, Leases: []string{"l1"}}}
	data, err := encodeCheckpoint(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeCheckpoint(data)
	if err != nil || len(out) != 1 || out["u1"].Leases[0] != "l1" || out["u1"].Results[0] != in["u1"].Results[0] {
		t.Fatalf("round trip %+v, %v", out, err)
	}
	for _, bad := range []string{"", "{}", `{"version":2}`, string(data[:len(data)-20]) + `"}`,
		`{"version":1,"claims":{"u":{"results":[{}],"leases":[]}},"checksum":""}`} {
		if _, err := decodeCheckpoint([]byte(bad)); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("decode %q: %v, want ErrBadCheckpoint", bad, err)
		}
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	good, _ := encodeCheckpoint(map[string]preparedClaim{"u1": {Results: []Result{gpuResult("gpu-1", GiB)}, Leases: []string{"l1"}}})
	f.Add(good)
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		claims, err := decodeCheckpoint(data)
		if err != nil {
			return
		}
		again, err := encodeCheckpoint(claims)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeCheckpoint(again); err != nil {
			t.Fatalf("re-encoded checkpoint refused: %v", err)
		}
		for uid, c := range claims {
			if uid == "" || len(c.Leases) != len(c.Results) {
				t.Fatalf("accepted claim %q with %d leases for %d results", uid, len(c.Leases), len(c.Results))
			}
		}
	})
}
