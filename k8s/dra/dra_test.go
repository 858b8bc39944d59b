package dra

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/testtmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// fakeClaim is one ResourceClaim of the fake API server.
type fakeClaim struct {
	ns, name string
	results  []Result
	reserved bool
}

// fakeAPI is the API server: claims and the published slices.
type fakeAPI struct {
	mu          sync.Mutex
	claims      map[string]fakeClaim // by uid
	slices      []Slice
	listErr     error // List fails with it
	lists, gets int   // calls of List and Allocation
}

func (f *fakeAPI) Allocation(_ context.Context, _, _, uid string) ([]Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	c, ok := f.claims[uid]
	if !ok {
		return nil, errors.New("no such claim")
	}
	return c.results, nil
}

func (f *fakeAPI) List(context.Context) ([]Claim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []Claim
	for uid, c := range f.claims {
		out = append(out, Claim{UID: uid, Namespace: c.ns, Name: c.name, Results: c.results, Reserved: c.reserved})
	}
	return out, nil
}

func (f *fakeAPI) Publish(_ context.Context, s Slice) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slices = append(f.slices, s)
	return nil
}

// put adds (or replaces) a claim allocated and reserved for a pod.
func (f *fakeAPI) put(uid string, results ...Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims[uid] = fakeClaim{ns: "default", name: "c-" + uid, results: results, reserved: true}
}

// edit changes the claim uid under the lock (delete it with delete(f.claims, uid)).
func (f *fakeAPI) edit(fn func(claims map[string]fakeClaim)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.claims)
}

// counts returns the calls of List and Allocation so far.
func (f *fakeAPI) counts() (lists, gets int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists, f.gets
}

func (f *fakeAPI) last() (Slice, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.slices) == 0 {
		return Slice{}, 0
	}
	return f.slices[len(f.slices)-1], len(f.slices)
}

// rig is a daemon, the fake API server and the driver's directories; start
// runs a driver over them (again after stop: a restart).
type rig struct {
	c      *client.Client
	api    *fakeAPI
	dir    string
	cdi    string
	set    func(int, int, string, int64) error
	plugin drapb.DRAPluginClient
	reg    registerapi.RegistrationClient
	// stop ends the running driver as a crash would: no clean-up.
	stop func()
}

func newRig(t *testing.T) *rig {
	t.Helper()
	c, sim := startDaemon(t)
	dir := testtmp.ShortDir(t)
	return &rig{c: c, api: &fakeAPI{claims: map[string]fakeClaim{}}, dir: dir, cdi: filepath.Join(dir, "cdi"), set: sim.SetProcess}
}

func startDriver(t *testing.T) *rig {
	t.Helper()
	r := newRig(t)
	r.start(t, r.c)
	return r
}

// start runs a driver talking to daemon (r.c, or a wrapper of it).
func (r *rig) start(t *testing.T, daemon Daemon) {
	t.Helper()
	d, err := New(Options{
		Daemon: daemon, Claims: r.api, Slices: r.api, Log: testshared.Logger(t).With("c", "dra"), Node: "node1",
		Interval: 20 * time.Millisecond, LeaseTTL: time.Minute,
		PluginDir: filepath.Join(r.dir, "plugin"), RegistryDir: filepath.Join(r.dir, "registry"), CDIDir: r.cdi,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("driver: %v", err)
			}
		})
	}
	t.Cleanup(r.stop)
	dial := func(path string) *grpc.ClientConn {
		waitFor(t, path, func() bool { return r.listening(path) })
		conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	r.reg = registerapi.NewRegistrationClient(dial(filepath.Join(r.dir, "registry", DriverName+"-reg.sock")))
	r.plugin = drapb.NewDRAPluginClient(dial(filepath.Join(r.dir, "plugin", "dra.sock")))
}

// listening tells whether a Unix socket accepts connections.
func (r *rig) listening(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func (r *rig) device(t *testing.T, name string) Device {
	t.Helper()
	s, _ := r.api.last()
	i := slices.IndexFunc(s.Devices, func(d Device) bool { return d.Name == name })
	if i < 0 {
		t.Fatalf("no device %s in %+v", name, s.Devices)
	}
	return s.Devices[i]
}

// TestPublish: one device per GPU with its leasable memory (a full GPU left
// out); foreign memory
// and a local client's lease lower it, the driver's own leases do not.
func TestPublish(t *testing.T) {
	r := startDriver(t)
	waitFor(t, "a slice", func() bool { _, n := r.api.last(); return n > 0 })
	s, _ := r.api.last()
	// GPU 4 is full (a 22.82 GiB trainer): left out.
	var names []string
	for _, d := range s.Devices {
		names = append(names, d.Name)
	}
	if want := []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-5", "gpu-6", "gpu-7"}; !slices.Equal(names, want) ||
		s.Node != "node1" || s.Name() != "node1-gpu.wsched.io" {
		t.Fatalf("slice %+v: want devices %v", s, want)
	}
	gpu1 := r.device(t, "gpu-1").MemoryBytes
	if gpu1 < 21*GiB || gpu1 > 23*GiB || gpu1%(256<<20) != 0 {
		t.Fatalf("gpu-1 memory %d: want ≈ 22 GiB in 256 MiB steps", gpu1)
	}
	if err := r.set(1, 990001, "foreign", 10e9); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "foreign memory published", func() bool { return r.device(t, "gpu-1").MemoryBytes <= gpu1-9*GiB })
	after := r.device(t, "gpu-1").MemoryBytes
	if _, err := r.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: 2 * GiB, Device: "cuda:1"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "local lease published", func() bool { return r.device(t, "gpu-1").MemoryBytes == after-2*GiB })
	obj, err := json.Marshal(s.Object())
	if err != nil || !strings.Contains(string(obj), `"allowMultipleAllocations":true`) || !strings.Contains(string(obj), `"driver":"gpu.wsched.io"`) {
		t.Fatalf("object %s, %v", obj, err)
	}
}

// TestPrepareUnprepare over gRPC: registration info; a claim of 4 GiB on
// gpu-3 → a lease of 4 GiB on GPU 3 and a CDI spec with its environment;
// preparing again keeps the lease; a second claim shares the GPU; a claim
// larger than the GPU fails alone; unprepare releases and removes the spec.
func TestPrepareUnprepare(t *testing.T) {
	r := startDriver(t)
	ctx := context.Background()
	info, err := r.reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil || info.Type != registerapi.DRAPlugin || info.Name != DriverName || !slices.Equal(info.SupportedVersions, []string{drapb.DRAPluginService}) {
		t.Fatalf("info %v, %v", info, err)
	}
	r.api.put("uid-a", Result{Request: "gpu", Driver: DriverName, Pool: "node1", Device: "gpu-3", MemoryBytes: 4 * GiB})
	r.api.put("uid-b", Result{Request: "gpu", Driver: DriverName, Pool: "node1", Device: "gpu-3", MemoryBytes: 2 * GiB, ShareID: "s2"})
	r.api.put("uid-big", Result{Request: "gpu", Driver: DriverName, Pool: "node1", Device: "gpu-3", MemoryBytes: 40 * GiB})
	claim := func(uid string) *drapb.Claim { return &drapb.Claim{Namespace: "default", Name: "c-" + uid, Uid: uid} }
	prepare := func(uids ...string) map[string]*drapb.NodePrepareResourceResponse {
		var cs []*drapb.Claim
		for _, u := range uids {
			cs = append(cs, claim(u))
		}
		resp, err := r.plugin.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: cs})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Claims
	}
	mine := func(uid string) []api.Lease {
		ls, err := r.c.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(ls, func(l api.Lease) bool { return l.Labels[LabelClaim] != uid || l.State != "granted" })
	}
	res := prepare("uid-a", "uid-big")
	a := res["uid-a"]
	if a.GetError() != "" || len(a.Devices) != 1 || a.Devices[0].DeviceName != "gpu-3" || a.Devices[0].CdiDeviceIds[0] != CDIKind+"=uid-a-gpu" {
		t.Fatalf("prepare uid-a: %v", a)
	}
	if e := res["uid-big"].GetError(); e == "" {
		t.Fatalf("prepare of 40 GiB: no error")
	}
	la := mine("uid-a")
	if len(la) != 1 || la[0].MemoryBytes != 4*GiB || la[0].GPUIndex != 3 || len(mine("uid-big")) != 0 {
		t.Fatalf("leases %+v, big %+v", la, mine("uid-big"))
	}
	var spec cdiSpec
	data, err := os.ReadFile(filepath.Join(r.cdi, "wsched.io-claim_uid-a.json"))
	if err != nil || json.Unmarshal(data, &spec) != nil || spec.Kind != CDIKind || len(spec.Devices) != 1 ||
		!slices.Contains(spec.Devices[0].Edits.Env, "CUDA_VISIBLE_DEVICES="+la[0].GPUUUID) ||
		!slices.Contains(spec.Devices[0].Edits.Env, "WSCHED_LEASE_ID="+la[0].ID) {
		t.Fatalf("CDI spec %s, %v", data, err)
	}
	if again := prepare("uid-a")["uid-a"]; again.GetError() != "" || len(mine("uid-a")) != 1 || mine("uid-a")[0].ID != la[0].ID {
		t.Fatalf("prepare again: %v, leases %+v", again, mine("uid-a"))
	}
	if b := prepare("uid-b")["uid-b"]; b.GetError() != "" || b.Devices[0].GetShareId() != "s2" || len(mine("uid-b")) != 1 || mine("uid-b")[0].GPUIndex != 3 {
		t.Fatalf("prepare uid-b (sharing gpu-3): %v, %+v", b, mine("uid-b"))
	}
	un, err := r.plugin.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{claim("uid-a"), claim("uid-b")}})
	if err != nil || un.Claims["uid-a"].GetError() != "" || un.Claims["uid-b"].GetError() != "" {
		t.Fatalf("unprepare: %v, %v", un, err)
	}
	if len(mine("uid-a")) != 0 || len(mine("uid-b")) != 0 {
		t.Fatalf("leases left: %+v %+v", mine("uid-a"), mine("uid-b"))
	}
	if _, err := os.Stat(filepath.Join(r.cdi, "wsched.io-claim_uid-a.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("CDI spec left: %v", err)
	}
}

func TestParseQuantity(t *testing.T) {
	for in, want := range map[string]int64{"4Gi": 4 * GiB, "4294967296": 4 * GiB, "1536Mi": 1536 << 20, "1.5G": 1.5e9, "0.5Ki": 512, "1k": 1000} {
		if got, err := parseQuantity(in); err != nil || got != want {
			t.Errorf("parseQuantity(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "Gi", "-1Gi", "1e3", "x", "99999999999Ei", "1.5.5Mi"} {
		if got, err := parseQuantity(in); err == nil {
			t.Errorf("parseQuantity(%q) = %d, want an error", in, got)
		}
	}
}

func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"4Gi", "4294967296", "1.5G", "0.5Ki", "-1", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseQuantity(s)
		if err == nil && n < 0 {
			t.Fatalf("parseQuantity(%q) = %d", s, n)
		}
	})
}
