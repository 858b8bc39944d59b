package deviceplugin

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/daemontest"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/testtmp"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func TestMain(m *testing.M) { os.Exit(testtmp.Main(m)) }

const (
	GiB      = units.GiB
	deadline = 10 * time.Second
)

// startDaemon runs a real wsched daemon in-process over the simulated
// 8×RTX 4090 server of testdata/sim-8x4090.toml.
func startDaemon(t *testing.T) (*client.Client, *inventory.Sim) {
	t.Helper()
	return daemontest.RunSim(t, "../../testdata/sim-8x4090.toml", testshared.Logger(t).With("c", "daemon"))
}

// waitFor polls cond until it holds, failing the test after deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testshared.WaitFor(t, deadline, what, cond)
}

// fakeKubelet is the kubelet's Registration service on kubelet.sock. Like
// the real one (devicemanager), it refuses a second registration of a
// plugin it is connected to: "device plugin already connected".
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	srv  *grpc.Server
	regs chan *pluginapi.RegisterRequest

	mu        sync.Mutex
	connected map[string]bool // endpoints
	attempts  int
	// onRegister, when set, runs inside Register (before it answers).
	onRegister func()
}

func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{srv: grpc.NewServer(), regs: make(chan *pluginapi.RegisterRequest, 8), connected: map[string]bool{}}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go func() { _ = k.srv.Serve(ln) }()
	t.Cleanup(k.srv.Stop)
	return k
}

func (k *fakeKubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.onRegister != nil {
		k.onRegister()
	}
	k.attempts++
	if k.connected[r.Endpoint] {
		return nil, fmt.Errorf("device plugin already connected: %s", r.Endpoint)
	}
	k.connected[r.Endpoint] = true
	k.regs <- r
	return &pluginapi.Empty{}, nil
}

// registrations is how many times a plugin called Register.
func (k *fakeKubelet) registrations() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.attempts
}

// registered waits for the next registration.
func (k *fakeKubelet) registered(t *testing.T) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.regs:
		return r
	case <-time.After(deadline):
		t.Fatal("the plugin did not register")
		return nil
	}
}

// fakePodResources is the kubelet's PodResources service: the pods it
// lists are set by the test; lists counts List calls.
type fakePodResources struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	mu    sync.Mutex
	pods  []*podresourcesapi.PodResources
	lists int
}

func startPodResources(t *testing.T, path string) *fakePodResources {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakePodResources{}
	srv := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(srv, f)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return f
}

func (f *fakePodResources) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	return &podresourcesapi.ListPodResourcesResponse{PodResources: f.pods}, nil
}

// setPod lists one pod whose container holds ids (none: no pods).
func (f *fakePodResources) setPod(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = nil
	if len(ids) > 0 {
		f.pods = []*podresourcesapi.PodResources{{Name: "sensevoice-0", Namespace: "default", Containers: []*podresourcesapi.ContainerResources{{
			Name: "sensevoice", Devices: []*podresourcesapi.ContainerDevices{{ResourceName: ResourceName, DeviceIds: ids}},
		}}}}
	}
}

func (f *fakePodResources) listCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}
