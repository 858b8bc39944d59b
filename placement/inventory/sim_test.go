package inventory

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/wsched/wsched/internal/units"
)

func loadSeedSim(t *testing.T) Config {
	t.Helper()
	data, err := os.ReadFile("../../testdata/sim-8x4090.toml")
	if err != nil {
		t.Fatal(err)
	}
	file := struct {
		Inventory Config `toml:"inventory"`
	}{DefaultConfig()}
	if err := toml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if err := file.Inventory.Validate(); err != nil {
		t.Fatal(err)
	}
	return file.Inventory
}

// gib rounds bytes to GiB with two decimals, as the seed prints them.
func gib(b int64) string { return units.FormatBytes(b) }

// TestSimReproducesSeed checks the seed's 8×RTX 4090 example (seed 001):
// GPU 0 23.69 GiB total, 21.23 used by 3 processes, 2.46 free; GPU 1 0.23
// used, 23.46 free; GPU 2 15.42 used, 8.27 free.
func TestSimReproducesSeed(t *testing.T) {
	inv := loadSeedSim(t)
	p, sim, err := Open(inv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sim == nil || p.Name() != "sim" {
		t.Fatalf("Open(sim) = %s, sim %v", p.Name(), sim)
	}
	snap, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		total, used, free string
		procs             int
	}{
		{"23.69 GiB", "21.23 GiB", "2.46 GiB", 3},
		{"23.69 GiB", "235.52 MiB", "23.46 GiB", 0},
		{"23.69 GiB", "15.42 GiB", "8.27 GiB", 1},
	}
	for i, w := range want {
		g := snap.GPUs[i]
		if gib(g.TotalBytes) != w.total || gib(g.UsedBytes) != w.used || gib(g.FreeBytes) != w.free || len(g.Processes) != w.procs {
			t.Errorf("GPU %d: total %s used %s free %s procs %d; want %+v", i, gib(g.TotalBytes), gib(g.UsedBytes), gib(g.FreeBytes), len(g.Processes), w)
		}
	}
	if pct := snap.GPUs[0].UsedPct(); pct < 89.55 || pct >= 89.65 {
		t.Errorf("GPU 0 use = %.2f%%, seed says 89.6%%", pct)
	}
	p0 := snap.GPUs[0].Processes
	if p0[0].PID != 1863729 || p0[0].UsedBytes != 20_550_000_000 || p0[2].PID != 1003902 || p0[2].UsedBytes != 828_000_000 || p0[0].Name != "python" {
		t.Errorf("GPU 0 processes: %+v", p0)
	}
	if snap.GPUs[0].UUID != SimUUID(0) || SimUUID(0) == SimUUID(1) {
		t.Errorf("sim UUIDs: %s %s", SimUUID(0), SimUUID(1))
	}
}

func TestSimChanges(t *testing.T) {
	inv := loadSeedSim(t)
	sim := NewSim(inv.Sim)
	p, _ := NewNVML(sim.Interface(), WithName("sim"))
	ctx := context.Background()
	before, _ := p.Snapshot(ctx)
	if err := sim.SetProcess(1, 4242, "whisper", 2*units.GiB); err != nil {
		t.Fatal(err)
	}
	sim.SetLoad(1, 55, 60)
	after, _ := p.Snapshot(ctx)
	g := after.GPUs[1]
	if g.UsedBytes != before.GPUs[1].UsedBytes+2*units.GiB || len(g.Processes) != 1 || g.Processes[0].Name != "whisper" || *g.UtilizationPct != 55 {
		t.Errorf("after SetProcess: %+v", g)
	}
	sim.RemoveProcess(4242)
	again, _ := p.Snapshot(ctx)
	if again.GPUs[1].UsedBytes != before.GPUs[1].UsedBytes || len(again.GPUs[1].Processes) != 0 {
		t.Errorf("after RemoveProcess: %+v", again.GPUs[1])
	}
	if err := sim.SetProcess(1, 1, "hog", 30*units.GiB); err == nil {
		t.Error("a process larger than the GPU was accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	used := units.Bytes(9 * units.GiB)
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"defaults", func(*Config) {}, ""},
		{"sim without GPUs", func(c *Config) { c.Provider = ProviderSim }, `provider: "sim" needs at least one [[inventory.sim]] GPU`},
		{"refresh", func(c *Config) { c.RefreshInterval = 0 }, "refresh_interval: 0s is not allowed: want at least 100ms"},
		{"used over memory", func(c *Config) { c.Sim = []SimGPU{{Memory: units.Bytes(8 * units.GiB), Used: &used}} }, "sim#0.used: 9GiB is more than memory (8GiB)"},
		{"bad pid", func(c *Config) { c.Sim = []SimGPU{{Memory: 1, Processes: []SimProcess{{PID: 0}}}} }, "sim#0.process#0.pid: 0 is not allowed: want a PID above 0"},
		{"bad uuid", func(c *Config) { c.Sim = []SimGPU{{Memory: 1, UUID: "x"}} }, `sim#0.uuid: "x" is not allowed: want a GPU UUID such as "GPU-5a1c0a4e-…"`},
	}
	for _, tt := range tests {
		c := DefaultConfig()
		tt.mod(&c)
		err := c.Validate()
		if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && got != tt.want) {
			t.Errorf("%s: %v, want %s", tt.name, err, tt.want)
		}
	}
}
