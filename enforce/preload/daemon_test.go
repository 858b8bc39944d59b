package preload_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/enforce/preload"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/daemontest"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

// With [enforcement] mode = "preload" and the library installed beside the
// binary, the daemon shows the tier per GPU and a lease's environment puts
// the cap in front of the driver. The holder, started with exactly that
// environment, allocates past its lease (borrowing), then past lease +
// borrow: the allocation fails with CUDA_ERROR_OUT_OF_MEMORY and the daemon
// publishes an overrun event while the process still runs — at allocation
// time, not at the next NVML sample (the simulated GPU never shows the
// process at all).
func TestOverrunReachesDaemonAtAllocation(t *testing.T) {
	k := buildKit(t)
	installed := installBesideBinary(t, k.lib)
	dir := t.TempDir()
	cfg := config.Defaults()
	cfg.Enforcement.Mode, cfg.Enforcement.Borrow = "preload", units.Bytes(512*units.MiB)
	cfg.Daemon.Socket, cfg.Daemon.StateDir = filepath.Join(dir, "wsched.sock"), filepath.Join(dir, "state")
	cfg.Inventory.Provider = inventory.ProviderSim
	cfg.Inventory.Sim = []inventory.SimGPU{{Name: "Sim GPU", Memory: units.Bytes(24 * units.GiB)}}
	c := daemontest.Run(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	events := follow(ctx, t, c)

	l, err := c.Acquire(ctx, api.LeaseRequest{MemoryBytes: units.GiB})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"LD_PRELOAD": installed, "WSCHED_CUDA_LIMIT_BYTES": "1610612736", "WSCHED_SOCKET": cfg.Daemon.Socket,
		"WSCHED_LEASE_ID": l.ID, "WSCHED_MEMORY_BYTES": "1073741824"}
	for key, v := range want {
		if l.Env[key] != v {
			t.Errorf("lease env %s = %q, want %q", key, l.Env[key], v)
		}
	}
	checkTiers(ctx, t, c, "preload")
	h := k.start(t, l.Env, "direct", "805306368", "536870912", "pause", "536870912", "pause")
	defer h.stop()
	out := h.out
	steps := []struct{ allocs, event string }{
		{"alloc 805306368 rc 0|alloc 536870912 rc 0", "allocated 1.25 GiB of a 1.00 GiB lease (borrowing, cap 1.50 GiB)"},
		{"alloc 536870912 rc 2", "allocation of 512.00 MiB refused by the preload cap"},
	}
	for _, step := range steps {
		var lines []string
		for out.Scan() && out.Text() != "paused" {
			lines = append(lines, out.Text())
		}
		if got := strings.Join(lines, "|"); got != step.allocs {
			t.Fatalf("allocations: %q, want %q", got, step.allocs)
		}
		waitOverrun(ctx, t, events, l.ID, step.event) // the process is paused: the report came at allocation
		_, _ = h.stdin.Write([]byte("\n"))
	}
	st, err := c.Status(ctx)
	if err != nil || st.Stats.Overruns < 2 {
		t.Errorf("status overruns = %d (%v), want at least 2", st.Stats.Overruns, err)
	}
}

// installBesideBinary copies lib beside the test binary, where the daemon
// looks for it (preload.Dirs), and returns its path.
func installBesideBinary(t *testing.T, lib string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(filepath.Dir(exe), preload.LibName)
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(dst) })
	return dst
}

// checkTiers checks that /v1/gpus and /v1/status show tier for every GPU.
func checkTiers(ctx context.Context, t *testing.T, c *client.Client, tier string) {
	t.Helper()
	gpus, err := c.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gpus.GPUs {
		if g.Enforcement == nil || g.Enforcement.Tier != tier || g.Enforcement.Reason == "" {
			t.Errorf("GPU %d enforcement %+v, want tier %s with a reason", g.Index, g.Enforcement, tier)
		}
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Enforcement) != len(gpus.GPUs) || len(st.Enforcement) == 0 || st.Enforcement[0].Tier != tier {
		t.Errorf("status enforcement %+v, want tier %s for %d GPUs", st.Enforcement, tier, len(gpus.GPUs))
	}
}

// waitOverrun waits for lease id's overrun event whose reason has want.
func waitOverrun(ctx context.Context, t *testing.T, events <-chan api.Event, id, want string) {
	t.Helper()
	for {
		select {
		case ev := <-events:
			if ev.Type == "overrun" && ev.Lease.ID == id && strings.Contains(ev.Reason, want) {
				return
			}
			if ev.Type == "overrun" {
				t.Logf("other overrun event: %s", ev.Reason)
			}
		case <-ctx.Done():
			t.Fatalf("no overrun event %q for lease %s while its holder runs", want, id)
		}
	}
}

// follow streams the daemon's events into a channel; it returns once the
// stream is known to be open (a probe lease's grant came through it).
func follow(ctx context.Context, t *testing.T, c *client.Client) <-chan api.Event {
	t.Helper()
	ch := make(chan api.Event, 256)
	go func() {
		err := c.Events(ctx, func(ev api.Event) error {
			select {
			case ch <- ev:
			case <-ctx.Done():
			}
			return nil
		})
		if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			t.Errorf("events: %v", err)
		}
	}()
	for {
		probe, err := c.Acquire(ctx, api.LeaseRequest{MemoryBytes: units.MiB})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Release(ctx, probe.ID); err != nil {
			t.Fatal(err)
		}
		if drainFor(ch, probe.ID) {
			return ch
		}
		if ctx.Err() != nil {
			t.Fatal("the event stream never opened")
		}
	}
}

// drainFor reads the events that arrive within 200ms of each other and
// reports whether one was about id.
func drainFor(ch chan api.Event, id string) bool {
	for {
		select {
		case ev := <-ch:
			if ev.Lease.ID == id {
				return true
			}
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}
}
