package dra

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/testtmp"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

func TestMain(m *testing.M) { os.Exit(testtmp.Main(m)) }

const (
	GiB      = units.GiB
	deadline = 10 * time.Second
)

func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// startDaemon runs a real wsched daemon in-process over the simulated
// 8×RTX 4090 server of testdata/sim-8x4090.toml.
func startDaemon(t *testing.T) (*client.Client, *inventory.Sim) {
	t.Helper()
	data, err := os.ReadFile("../../testdata/sim-8x4090.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data, "sim-8x4090.toml")
	if err != nil {
		t.Fatal(err)
	}
	dir := testtmp.ShortDir(t)
	cfg.Daemon.StateDir = filepath.Join(dir, "state")
	cfg.Daemon.Socket = filepath.Join(dir, "d.sock")
	cfg.Inventory.RefreshInterval = units.Duration(50 * time.Millisecond)
	cfg.Inventory.MaxAge = units.Duration(20 * time.Millisecond)
	sim := inventory.NewSim(cfg.Inventory.Sim)
	prov, err := inventory.NewNVML(sim.Interface(), inventory.WithName("sim"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(daemon.Options{Config: cfg, Log: logger(t).With("c", "daemon"), Provider: prov, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	c := client.New(cfg.Daemon.Socket)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
		c.Close()
	})
	waitFor(t, "daemon up", func() bool { return c.Health(context.Background()) == nil })
	return c, sim
}

// waitFor polls cond until it holds, failing the test after deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(deadline)
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
