package deviceplugin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/testtmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// node is a fake kubelet node: the daemon, the kubelet's two services, the
// plugin running, and a client connection to the plugin.
type node struct {
	c      *client.Client
	dir    string
	kl     *fakeKubelet
	pr     *fakePodResources
	plugin pluginapi.DevicePluginClient
	// updates are the ListAndWatch responses.
	updates chan *pluginapi.ListAndWatchResponse
}

func startNode(t *testing.T) (*node, func(int, int, string, int64) error) {
	t.Helper()
	c, sim := startDaemon(t)
	n := &node{c: c, dir: testtmp.ShortDir(t)}
	n.kl = startKubelet(t, n.dir)
	prSock := filepath.Join(n.dir, "pr.sock")
	n.pr = startPodResources(t, prSock)
	devRoot := t.TempDir()
	for _, name := range []string{"nvidiactl", "nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidia4", "nvidia5", "nvidia6", "nvidia7"} {
		if err := os.WriteFile(filepath.Join(devRoot, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p, err := New(Options{
		Daemon: c, Log: testshared.Logger(t).With("c", "plugin"), Unit: GiB, Interval: 20 * time.Millisecond,
		LeaseTTL: time.Minute, PluginDir: n.dir, PodResources: prSock, DevRoot: devRoot,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("plugin: %v", err)
		}
	})

	reg := n.kl.registered(t)
	if reg.Version != pluginapi.Version || reg.ResourceName != ResourceName || reg.Endpoint != Endpoint {
		t.Fatalf("registration = %v", reg)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(n.dir, reg.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	n.plugin = pluginapi.NewDevicePluginClient(conn)
	wctx, wcancel := context.WithCancel(context.Background())
	t.Cleanup(wcancel)
	watch, err := n.plugin.ListAndWatch(wctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	n.updates = make(chan *pluginapi.ListAndWatchResponse, 64)
	go func() {
		defer close(n.updates)
		for {
			r, err := watch.Recv()
			if err != nil {
				return
			}
			select {
			case n.updates <- r:
			case <-wctx.Done():
				return
			}
		}
	}()
	return n, sim.SetProcess
}

// advertised reads ListAndWatch updates until want(healthy count) holds.
func (n *node) advertised(t *testing.T, want func(int) bool) []*pluginapi.Device {
	t.Helper()
	timeout := time.After(deadline)
	for last := -1; ; {
		select {
		case r, ok := <-n.updates:
			if !ok {
				t.Fatal("list and watch ended")
			}
			if last = healthy(r.Devices); want(last) {
				return r.Devices
			}
		case <-timeout:
			t.Fatalf("timed out; last advertised %d units", last)
		}
	}
}

// expectedUnits computes the advertisement from the daemon's view: per
// placeable GPU, whole GiB of usable − foreign − others' leases.
func expectedUnits(t *testing.T, c *client.Client) int {
	t.Helper()
	gpus, err := c.GPUs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, g := range gpus.GPUs {
		if free := g.Accounting.UsableBytes - g.Accounting.ForeignBytes; g.Accounting.Placeable && free > 0 {
			sum += int(free / GiB)
		}
	}
	return sum
}

func TestDevicePlugin(t *testing.T) {
	n, setProcess := startNode(t)
	ctx := context.Background()

	// The sim 8×4090: usable (23.69 − 0.5) GiB × 0.95 each, less what the
	// seed's processes use: 0+21+6+12+0+17+21+9 whole GiB.
	want := expectedUnits(t, n.c)
	if want != 86 {
		t.Fatalf("expected units = %d, want 86 for testdata/sim-8x4090.toml", want)
	}
	n.advertised(t, func(got int) bool { return got == want })

	// Foreign memory lowers it: 10 GB more on GPU 1 (21.80 → 12.49 GiB).
	if err := setProcess(1, 990001, "foreign", 10e9); err != nil {
		t.Fatal(err)
	}
	devs := n.advertised(t, func(got int) bool { return got == want-9 })

	// Allocate 4 units: a lease of 4 GiB on one GPU, with its env.
	// (The kubelet records the pod's devices right after Allocate; Grace
	// spares new leases meanwhile. It is 0 here, so the pod is listed first.)
	ids := []string{devs[0].ID, devs[1].ID, devs[2].ID, devs[3].ID}
	n.pr.setPod(ids...)
	resp, err := n.plugin.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		t.Fatalf("allocate: %v", err)
	}
	env := resp.ContainerResponses[0].Envs
	l, err := n.c.Lease(ctx, env["WSCHED_LEASE_ID"])
	if err != nil {
		t.Fatalf("lease %q: %v", env["WSCHED_LEASE_ID"], err)
	}
	if l.State != "granted" || l.MemoryBytes != 4*GiB || env["CUDA_VISIBLE_DEVICES"] != l.GPUUUID || !strings.HasPrefix(l.GPUUUID, "GPU-") ||
		env["SENSEVOICE_DEVICE"] != "cuda:0" || env["NVIDIA_VISIBLE_DEVICES"] != l.GPUUUID || l.Labels[LabelDevices] != strings.Join(slices.Sorted(slices.Values(ids)), ",") {
		t.Fatalf("lease %+v, env %v", l, env)
	}
	var nodes []string
	for _, d := range resp.ContainerResponses[0].Devices {
		nodes = append(nodes, d.ContainerPath)
	}
	if !slices.Equal(nodes, []string{"/dev/nvidiactl", "/dev/nvidia" + strconv.Itoa(l.GPUIndex)}) {
		t.Fatalf("device nodes %v", nodes)
	}

	// A second container asking more than any GPU has left (18 GiB; the
	// most is 17.45 on GPU 5) is refused.
	var big []string
	for _, d := range devs[4:22] {
		big = append(big, d.ID)
	}
	if _, err := n.plugin.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: big}}}); err == nil || !strings.Contains(err.Error(), ErrNoMemory.Error()) {
		t.Fatalf("allocate of 18 units: err = %v, want %v", err, ErrNoMemory)
	}

	// The container's GPU process (started by the runtime, not by a lease
	// holder) is attributed to the lease through WSCHED_LEASE_ID.
	pid := orphan(t, "WSCHED_LEASE_ID="+l.ID)
	if err := setProcess(l.GPUIndex, pid, "python", 2e9); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "process attributed", func() bool {
		l, err := n.c.Lease(ctx, l.ID)
		return err == nil && slices.Contains(l.PIDs, pid)
	})

	// While the pod runs, reconciliations keep its lease.
	lists := n.pr.listCount()
	waitFor(t, "two reconciliations", func() bool { return n.pr.listCount() >= lists+2 })
	if got, err := n.c.Lease(ctx, l.ID); err != nil || got.State != "granted" {
		t.Fatalf("lease of a running pod: %+v, %v", got, err)
	}

	// The pod is gone: its lease is released.
	n.pr.setPod()
	waitFor(t, "lease released", func() bool {
		got, err := n.c.Lease(ctx, l.ID)
		return err == nil && got.State != "granted"
	})

	// The kubelet restarts: its socket is removed and created again (and,
	// as the kubelet does, the plugin's socket is removed): the plugin
	// serves again and registers with the new kubelet.
	n.kl.srv.Stop()
	if err := os.Remove(filepath.Join(n.dir, Endpoint)); err != nil {
		t.Fatal(err)
	}
	kl2 := startKubelet(t, n.dir)
	if reg := kl2.registered(t); reg.ResourceName != ResourceName {
		t.Fatalf("re-registration = %v", reg)
	}
	waitFor(t, "plugin socket back", func() bool { return exists(filepath.Join(n.dir, Endpoint)) })
}

// orphan starts `sleep` with env, detached from this process (its parent
// exits at once), so the daemon cannot attribute it by parentage, and kills
// it at cleanup.
func orphan(t *testing.T, env ...string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}
