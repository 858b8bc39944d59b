package dra

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/testshared"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// childEnv makes the test binary a driver process (driverChild) instead of
// running tests; its settings come in the environment.
const childEnv = "WSCHED_DRA_TEST_DRIVER"

// driverChild is a driver process as `wsched k8s dra-driver` runs it: the
// daemon through its socket, the API server over HTTPS with a bearer token.
// SIGTERM stops it; the test kills it with SIGKILL.
func driverChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	env := os.Getenv
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("c", "driver", "pid", os.Getpid())
	as, err := NewAPIServer(env("DRA_API"), env("DRA_TOKEN"), env("DRA_CA"))
	if err != nil {
		log.Error("api server", "err", err)
		return 1
	}
	c := client.New(env("DRA_SOCKET"))
	defer c.Close()
	d, err := New(Options{
		Daemon: c, Claims: as, Slices: as, Log: log, Node: "node1",
		Interval: 20 * time.Millisecond, LeaseTTL: time.Minute,
		PluginDir: env("DRA_PLUGIN"), RegistryDir: env("DRA_REGISTRY"), CDIDir: env("DRA_CDI"),
	})
	if err == nil {
		err = d.Run(ctx)
	}
	if err != nil {
		log.Error("driver", "err", err)
		return 1
	}
	return 0
}

// startChild runs a driver process over r's directories, the daemon and
// the fake API server at api; it returns the process (killed and waited
// for at the end of the test).
func (r *rig) startChild(t *testing.T, api, token, ca string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "DRA_API="+api, "DRA_TOKEN="+token, "DRA_CA="+ca,
		"DRA_SOCKET="+r.c.Socket(), "DRA_PLUGIN="+filepath.Join(r.dir, "plugin"),
		"DRA_REGISTRY="+filepath.Join(r.dir, "registry"), "DRA_CDI="+r.cdi)
	cmd.Stderr = testshared.LogWriter(t)
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		cancel()
	})
	sock := filepath.Join(r.dir, "plugin", "dra.sock")
	waitFor(t, "the driver process listening", func() bool { return r.listening(sock) })
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r.plugin = drapb.NewDRAPluginClient(conn)
	return cmd
}

// TestKilledDriverProcess: a driver process prepares two claims and is
// killed with SIGKILL; one claim is deleted while it is down. A new
// process releases that claim's lease and CDI spec, keeps the other's
// lease (same ID) and answers the kubelet's NodePrepareResources for it
// with that lease again.
func TestKilledDriverProcess(t *testing.T) {
	r := newRig(t)
	fs := newFakeServer(1)
	fs.put(claimObject("keep", "default", "c-keep", "gpu-3", "4Gi", true), claimObject("gone", "default", "c-gone", "gpu-5", "2Gi", true))
	api, token, ca := serveTLS(t, fs)

	first := r.startChild(t, api, token, ca)
	ids := map[string]string{}
	for _, uid := range []string{"keep", "gone"} {
		if res := r.prepareOne(t, uid); res.GetError() != "" {
			t.Fatalf("prepare %s: %s", uid, res.GetError())
		}
		if ids[uid] = r.leaseID(t, uid); ids[uid] == "" || !exists(r.spec(uid)) {
			t.Fatalf("claim %s: lease %q, spec there %v", uid, ids[uid], exists(r.spec(uid)))
		}
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := first.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("driver process: %v, want killed by SIGKILL", err)
	}
	fs.remove("gone")
	if r.leaseID(t, "gone") != ids["gone"] {
		t.Fatal("the lease went with the process: nothing left to reconcile")
	}

	r.startChild(t, api, token, ca)
	waitFor(t, "the deleted claim's lease released", func() bool { return r.leaseID(t, "gone") == "" })
	waitFor(t, "its CDI spec removed", func() bool { return !exists(r.spec("gone")) })
	if got := r.leaseID(t, "keep"); got != ids["keep"] || !exists(r.spec("keep")) {
		t.Fatalf("keep: lease %q after the restart, want %q; spec there %v", got, ids["keep"], exists(r.spec("keep")))
	}
	if res := r.prepareOne(t, "keep"); res.GetError() != "" || r.leaseID(t, "keep") != ids["keep"] {
		t.Fatalf("prepare keep again: %v, lease %q want %q", res, r.leaseID(t, "keep"), ids["keep"])
	}
}
