package placement

import (
	"github.com/wsched/wsched/placement/inventory"
)

// LeaseUse is what accounting needs of one granted lease on a GPU: its size
// and the processes that belong to it (holder and registered children).
type LeaseUse struct {
	Bytes  int64
	Holder int
	PIDs   []int
}

// Account is one GPU seen through the accounting formula (see the package
// documentation). Byte fields may be negative only for AvailableBytes when a
// GPU is overcommitted (foreign growth after grants).
type Account struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	Name  string `json:"name"`

	TotalBytes    int64 `json:"total_bytes"`
	UsedBytes     int64 `json:"used_bytes"`
	FreeBytes     int64 `json:"free_bytes"`
	ReservedBytes int64 `json:"reserved_bytes"`
	// UsableBytes = (total − reserved) × safety_factor.
	UsableBytes int64 `json:"usable_bytes"`
	// LeasedBytes = Σ granted leases on this GPU.
	LeasedBytes int64 `json:"leased_bytes"`
	// AttributedBytes is NVML-used memory of processes that hold a lease here.
	AttributedBytes int64 `json:"attributed_bytes"`
	// ForeignBytes = used − attributed: processes without a lease plus driver
	// overhead.
	ForeignBytes int64 `json:"foreign_bytes"`
	// UnrealizedBytes = Σ over leases of max(0, lease − what its processes use).
	UnrealizedBytes int64 `json:"unrealized_bytes"`
	// AvailableBytes = min(usable − leased − foreign, free − unrealized).
	AvailableBytes int64 `json:"available_bytes"`

	UtilizationPct *int `json:"utilization_pct,omitempty"`
	TemperatureC   *int `json:"temperature_c,omitempty"`
	// Placeable is false for unhealthy and MIG-enabled GPUs; Reason says why.
	Placeable bool   `json:"placeable"`
	Reason    string `json:"reason,omitempty"`
}

// Accounting applies the one formula to a GPU reading and the leases granted
// on it. It is the only place available memory is computed.
func Accounting(g inventory.GPU, cfg Config, leases []LeaseUse) Account {
	used := make(map[int]int64, len(g.Processes))
	for _, p := range g.Processes {
		used[p.PID] += p.UsedBytes
	}
	var leased, attributed, unrealized int64
	for _, l := range leases {
		leased += l.Bytes
		realized := used[l.Holder]
		delete(used, l.Holder) // a PID counts once even if listed twice
		for _, pid := range l.PIDs {
			realized += used[pid]
			delete(used, pid)
		}
		attributed += realized
		unrealized += max(0, l.Bytes-realized)
	}
	return accountFrom(g, cfg, leased, attributed, unrealized)
}

// accountFrom applies the formula to a reading and the sums over its
// leases: Σ lease bytes, attributed and unrealized memory. Accounting and
// the engine's running sums (book) both end here.
func accountFrom(g inventory.GPU, cfg Config, leased, attributed, unrealized int64) Account {
	a := Account{
		Index: g.Index, UUID: g.UUID, Name: g.Name,
		TotalBytes: g.TotalBytes, UsedBytes: g.UsedBytes, FreeBytes: g.FreeBytes,
		ReservedBytes:  cfg.ReservedFor(g.Index, g.UUID),
		UtilizationPct: g.UtilizationPct, TemperatureC: g.TemperatureC,
		Placeable:   true,
		LeasedBytes: leased, AttributedBytes: attributed, UnrealizedBytes: unrealized,
	}
	a.UsableBytes = max(0, int64(float64(a.TotalBytes-a.ReservedBytes)*float64(cfg.SafetyFactor)))
	a.ForeignBytes = max(0, a.UsedBytes-a.AttributedBytes)
	a.AvailableBytes = min(a.UsableBytes-a.LeasedBytes-a.ForeignBytes, a.FreeBytes-a.UnrealizedBytes)

	switch {
	case !g.IsHealthy():
		a.Placeable, a.Reason = false, "unhealthy: "+g.Reason
	case g.MIG == inventory.MIGEnabled:
		a.Placeable, a.Reason = false, "MIG enabled: wsched does not place on MIG instances"
	}
	return a
}

// AvailableOrZero is AvailableBytes floored at 0, for display.
func (a Account) AvailableOrZero() int64 { return max(0, a.AvailableBytes) }
