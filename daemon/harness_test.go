package daemon

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/testtmp"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

const GiB = units.GiB

// testDaemon is a daemon serving a real Unix socket in a temp dir, over
// simulated GPUs.
type testDaemon struct {
	t      *testing.T
	cfg    *config.Config
	sim    *inventory.Sim
	d      *Daemon
	c      *client.Client
	socket string
	cancel context.CancelFunc
	done   chan error
}

// startDaemon serves n simulated GPUs of size bytes; mod adjusts the config.
func startDaemon(t *testing.T, n int, size int64, mod func(*config.Config)) *testDaemon {
	t.Helper()
	return runDaemon(t, simConfig(t, n, size, mod))
}

// simConfig is startDaemon's config: n simulated GPUs of size bytes, state
// and socket in temp dirs; mod adjusts it.
func simConfig(t *testing.T, n int, size int64, mod func(*config.Config)) *config.Config {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Defaults()
	cfg.Daemon.StateDir = filepath.Join(dir, "state")
	// The socket in a short directory: t.TempDir's path carries the test's
	// name, and make reliability's long subtest names pass sun_path's 107 bytes.
	cfg.Daemon.Socket = filepath.Join(testtmp.ShortDir(t), "wsched.sock")
	cfg.Daemon.SocketMode = 0o666
	cfg.Placement.Reserved, cfg.Placement.SafetyFactor = 0, 1
	cfg.Inventory.Provider = inventory.ProviderSim
	cfg.Inventory.RefreshInterval = units.Duration(100 * time.Millisecond)
	for i := 0; i < n; i++ {
		cfg.Inventory.Sim = append(cfg.Inventory.Sim, inventory.SimGPU{Name: "Sim GPU", Memory: units.Bytes(size)})
	}
	if mod != nil {
		mod(cfg)
	}
	return cfg
}

func runDaemon(t *testing.T, cfg *config.Config) *testDaemon {
	t.Helper()
	return runDaemonWith(t, cfg, nil)
}

// runDaemonWith is runDaemon with host, when not nil, adjusting the
// simulated GPUs and the daemon's options before the daemon is made.
func runDaemonWith(t *testing.T, cfg *config.Config, host func(*inventory.Sim, *Options)) *testDaemon {
	t.Helper()
	sim := inventory.NewSim(cfg.Inventory.Sim)
	opts := Options{Config: cfg, Version: "test"}
	if host != nil {
		host(sim, &opts)
	}
	p, err := inventory.NewNVML(sim.Interface(), inventory.WithName("sim"))
	if err != nil {
		t.Fatal(err)
	}
	opts.Provider = p
	opts.Log = slog.New(slog.NewTextHandler(testshared.LogWriter(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	td := &testDaemon{t: t, cfg: cfg, sim: sim, d: d, socket: cfg.Daemon.Socket, cancel: cancel, done: make(chan error, 1)}
	go func() { td.done <- d.Run(ctx) }()
	td.c = client.New(td.socket)
	testshared.WaitHealthy(t, td.c)
	t.Cleanup(td.stop)
	return td
}

func (td *testDaemon) stop() {
	if td.cancel == nil {
		return
	}
	td.cancel()
	if err := <-td.done; err != nil {
		td.t.Errorf("daemon: %v", err)
	}
	td.cancel = nil
	td.c.Close()
}

// raw sends an HTTP request over the socket and returns status and body.
func (td *testDaemon) raw(method, path, body string) (int, string) {
	td.t.Helper()
	conn, err := net.Dial("unix", td.socket)
	if err != nil {
		td.t.Fatal(err)
	}
	defer conn.Close()
	return rawRequest(td.t, conn, method, path, body)
}

func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}
