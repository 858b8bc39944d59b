package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/wsched/wsched/daemon/store"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/placement/inventory"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/host"
	"github.com/wsched/wsched/plugins/plugintest"
)

// TestBackendsEndpoint: GET /v1/backends lists the discovered backend with
// its Info, the refused world-writable file, and a warm instance with its
// lease and GPU; stopping the daemon stops the backend and releases its
// lease before the engine stops (nothing left in the state database).
func TestBackendsEndpoint(t *testing.T) {
	bin := plugintest.Build(t)
	dir := filepath.Dir(bin)
	evil := filepath.Join(dir, "wsched-backend-evil")
	if err := os.WriteFile(evil, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(evil, 0o777); err != nil {
		t.Fatal(err)
	}
	td := startDaemon(t, 1, 8*GiB, func(c *config.Config) { c.Backends.PluginDir, c.Backends.DevDirs = dir, nil })

	model := filepath.Join(t.TempDir(), "model.bin")
	if err := os.WriteFile(model, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	inst, release, err := td.d.host.Acquire(t.Context(), host.Spec{Backend: "fake", Load: plugins.LoadRequest{ModelPath: model}, MemoryBytes: GiB})
	if err != nil {
		t.Fatal(err)
	}
	release() // warm for [backends] keep_alive (5m)

	got, err := td.c.Backends(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Backends) != 1 || got.Backends[0].Name != "fake" || got.Backends[0].Path != bin || got.Backends[0].Version != "0.0.0-test" ||
		!slices.Equal(got.Backends[0].Devices, []string{"cpu", "cuda"}) {
		t.Errorf("backends = %+v", got.Backends)
	}
	if len(got.Refused) != 1 || got.Refused[0].Path != evil || got.Refused[0].Reason != "world-writable (mode 0777)" {
		t.Errorf("refused = %+v", got.Refused)
	}
	if len(got.Instances) != 1 {
		t.Fatalf("instances = %+v, want one", got.Instances)
	}
	i := got.Instances[0]
	if i.Backend != "fake" || i.Model != model || i.State != "idle" || i.Lease != inst.Lease().ID || i.GPUIndex != 0 ||
		i.GPUUUID != inventory.SimUUID(0) || i.PID != inst.PID() || i.MemoryBytes != GiB || i.ReportedBytes <= 0 || i.KeepAliveSeconds != 300 {
		t.Errorf("instance = %+v", i)
	}
	ls, err := td.c.Leases(t.Context())
	if err != nil || len(ls) != 1 || ls[0].Holder.PID != os.Getpid() || !slices.Contains(ls[0].PIDs, inst.PID()) {
		t.Errorf("leases = %+v, %v; want the backend's lease held by the daemon with the backend's pid", ls, err)
	}

	td.stop()
	if p, err := os.FindProcess(inst.PID()); err == nil && p.Signal(syscall.Signal(0)) == nil {
		t.Errorf("backend %d still runs after the daemon stopped", inst.PID())
	}
	db, err := store.Open(td.cfg.Daemon.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if stored, err := db.Leases(); err != nil || len(stored) != 0 {
		t.Errorf("stored leases after shutdown: %+v, %v; want the backend's lease released", stored, err)
	}
}
