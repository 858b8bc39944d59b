package placement

import (
	"testing"

	"github.com/wsched/wsched/internal/confval"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

func seedSnapshot(t *testing.T) inventory.Snapshot {
	t.Helper()
	sim := inventory.NewSim(seedGPUs(t))
	p, err := inventory.NewNVML(sim.Interface())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := p.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func placementCfg(reserved int64, safety float64) Config {
	p := DefaultConfig()
	p.Reserved, p.SafetyFactor = units.Bytes(reserved), confval.Fraction(safety)
	return p
}

// TestAccountingSeedForeign checks each term of the formula on the seed's
// GPUs 0 and 2, whose memory is held by processes without leases.
func TestAccountingSeedForeign(t *testing.T) {
	snap := seedSnapshot(t)
	cfg := placementCfg(512*units.MiB, 0.95)
	for _, i := range []int{0, 2} {
		g := snap.GPUs[i]
		a := Accounting(g, cfg, nil)
		usable := int64(float64(g.TotalBytes-512*units.MiB) * 0.95)
		if a.ReservedBytes != 512*units.MiB || a.UsableBytes != usable {
			t.Errorf("GPU %d: reserved %d usable %d, want %d", i, a.ReservedBytes, a.UsableBytes, usable)
		}
		if a.LeasedBytes != 0 || a.AttributedBytes != 0 || a.UnrealizedBytes != 0 {
			t.Errorf("GPU %d: lease terms without leases: %+v", i, a)
		}
		if a.ForeignBytes != g.UsedBytes {
			t.Errorf("GPU %d: foreign %d, want all used %d (processes + driver overhead)", i, a.ForeignBytes, g.UsedBytes)
		}
		if want := min(usable-g.UsedBytes, g.FreeBytes); a.AvailableBytes != want {
			t.Errorf("GPU %d: available %d, want %d", i, a.AvailableBytes, want)
		}
	}
	// The package doc's worked example: GPU 0 has 0.80 GiB available.
	if got := units.FormatBytes(Accounting(snap.GPUs[0], cfg, nil).AvailableBytes); got != "819.71 MiB" {
		t.Errorf("GPU 0 available = %s, the worked example says 0.80 GiB (819.71 MiB)", got)
	}
}

// TestAccountingLeases follows the doc's second example: GPU 1 with a 4 GiB
// lease whose holder has allocated 1.5 GiB.
func TestAccountingLeases(t *testing.T) {
	sim := inventory.NewSim(seedGPUs(t))
	if err := sim.SetProcess(1, 4242, "whisper", 3*GiB/2); err != nil {
		t.Fatal(err)
	}
	p, _ := inventory.NewNVML(sim.Interface())
	snap, _ := p.Snapshot(t.Context())
	g := snap.GPUs[1]
	cfg := placementCfg(512*units.MiB, 0.95)
	a := Accounting(g, cfg, []LeaseUse{{Bytes: 4 * GiB, Holder: 4242}})
	overhead := g.UsedBytes - 3*GiB/2
	if a.LeasedBytes != 4*GiB || a.AttributedBytes != 3*GiB/2 || a.ForeignBytes != overhead || a.UnrealizedBytes != 5*GiB/2 {
		t.Errorf("terms: %+v", a)
	}
	budget := a.UsableBytes - 4*GiB - overhead
	if a.AvailableBytes != min(budget, g.FreeBytes-5*GiB/2) || a.AvailableBytes != budget {
		t.Errorf("available %d, want the budget %d", a.AvailableBytes, budget)
	}
	if got := units.FormatBytes(a.AvailableBytes); got != "17.80 GiB" {
		t.Errorf("available = %s, the worked example says 17.80 GiB", got)
	}

	// A holder using more than its lease: the hardware term wins.
	if err := sim.SetProcess(1, 4242, "whisper", 6*GiB); err != nil {
		t.Fatal(err)
	}
	snap, _ = p.Snapshot(t.Context())
	a = Accounting(snap.GPUs[1], cfg, []LeaseUse{{Bytes: 4 * GiB, Holder: 4242}})
	if a.UnrealizedBytes != 0 || a.AvailableBytes != snap.GPUs[1].FreeBytes || a.AvailableBytes >= a.UsableBytes-a.LeasedBytes-a.ForeignBytes {
		t.Errorf("overrun: %+v", a)
	}
}

func TestAccountingReservedPerGPU(t *testing.T) {
	snap := seedSnapshot(t)
	cfg := placementCfg(512*units.MiB, 1)
	cfg.ReservedPerGPU = map[string]units.Bytes{"1": units.Bytes(2 * GiB), snap.GPUs[2].UUID: units.Bytes(GiB)}
	if r := Accounting(snap.GPUs[1], cfg, nil).ReservedBytes; r != 2*GiB {
		t.Errorf("GPU 1 reserved by index: %d", r)
	}
	if r := Accounting(snap.GPUs[2], cfg, nil).ReservedBytes; r != GiB {
		t.Errorf("GPU 2 reserved by UUID: %d", r)
	}
	if r := Accounting(snap.GPUs[3], cfg, nil).ReservedBytes; r != 512*units.MiB {
		t.Errorf("GPU 3 default reserved: %d", r)
	}
}

func TestAccountingUnplaceable(t *testing.T) {
	g := inventory.GPU{Index: 0, UUID: "GPU-x", TotalBytes: 8 * GiB, FreeBytes: 8 * GiB, Health: inventory.Unhealthy, Reason: "lost", MIG: inventory.MIGDisabled}
	if a := Accounting(g, placementCfg(0, 1), nil); a.Placeable || a.Reason != "unhealthy: lost" {
		t.Errorf("unhealthy GPU: %+v", a)
	}
	g.Health, g.MIG = inventory.Healthy, inventory.MIGEnabled
	if a := Accounting(g, placementCfg(0, 1), nil); a.Placeable {
		t.Errorf("MIG GPU placeable: %+v", a)
	}
}
