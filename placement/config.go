package placement

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wsched/wsched/internal/confval"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
)

// Config is the [placement] section of wsched.toml.
type Config struct {
	// Policy is spread, binpack or score.
	Policy Policy `toml:"policy"`
	// SafetyFactor scales (total − reserved) into usable memory, in (0, 1].
	SafetyFactor confval.Fraction `toml:"safety_factor"`
	// Reserved is held back on every GPU unless ReservedPerGPU says otherwise.
	Reserved units.Bytes `toml:"reserved"`
	// ReservedPerGPU overrides Reserved by GPU index ("0") or UUID.
	ReservedPerGPU map[string]units.Bytes `toml:"reserved_per_gpu"`
	// MinFreeWarn warns when a GPU's available memory falls below it.
	MinFreeWarn units.Bytes `toml:"min_free_warn"`
	// Score holds the weights of the score policy.
	Score ScoreWeights `toml:"score"`
	// FairShareHalfLife is the half-life of each uid's recent use
	// (GiB·seconds of granted GPU memory, decayed): within a priority
	// class the queue serves the uid that used less first.
	FairShareHalfLife units.Duration `toml:"fair_share_half_life"`
}

// ScoreWeights is the [placement.score] section: the seed's weighted score.
type ScoreWeights struct {
	Memory      confval.Fraction `toml:"memory"`
	Utilization confval.Fraction `toml:"utilization"`
	Temperature confval.Fraction `toml:"temperature"`
	Priority    confval.Fraction `toml:"priority"`
	// TemperatureLimit is the temperature (°C) at which headroom reaches 0.
	TemperatureLimit int `toml:"temperature_limit"`
}

// LeaseConfig is the [leases] section of wsched.toml.
type LeaseConfig struct {
	// DefaultMemory is leased when a request gives neither memory nor model.
	DefaultMemory units.Bytes `toml:"default_memory"`
	// DefaultTTL applies when a request names no ttl.
	DefaultTTL units.Duration `toml:"default_ttl"`
	// MaxTTL caps requested TTLs.
	MaxTTL units.Duration `toml:"max_ttl"`
	// MaxWait caps how long a request may wait in the queue.
	MaxWait units.Duration `toml:"max_wait"`
	// BackfillWindow is how long the queue head may be passed by smaller
	// requests before memory is held for it.
	BackfillWindow units.Duration `toml:"backfill_window"`
	// Aging raises a waiter's effective priority by one class per interval.
	Aging units.Duration `toml:"aging"`
	// ReclaimWait is how long a request that asked not to wait (wait 0)
	// waits anyway when reclaimable leases (idle backends) are being given
	// back to make room for it.
	ReclaimWait units.Duration `toml:"reclaim_wait"`
	// MaxQueue bounds the number of waiting requests.
	MaxQueue int `toml:"max_queue"`
	// OverrunTolerance is the fraction a holder may exceed its lease by.
	OverrunTolerance confval.Fraction `toml:"overrun_tolerance"`
	// Overrun is warn or kill.
	Overrun OverrunAction `toml:"overrun"`
}

// Policy names the GPU choice policy.
type Policy string

// Placement policies.
const (
	PolicySpread  Policy = "spread"
	PolicyBinpack Policy = "binpack"
	PolicyScore   Policy = "score"
)

// Policies are the placement policies there are.
var Policies = []Policy{PolicySpread, PolicyBinpack, PolicyScore}

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *Policy) UnmarshalText(b []byte) error {
	v, err := confval.Enum(string(b), "spread", "binpack", "score")
	*p = Policy(v)
	return err
}

// Check says why p names no policy (nil when it names one): a policy set
// other than by decoding (a Config built in code) is checked where it is
// used, not taken for spread.
func (p Policy) Check() error {
	if slices.Contains(Policies, p) {
		return nil
	}
	return confval.Bad("policy", "%q is not allowed: want spread, binpack or score", string(p))
}

// OverrunAction says what happens when a holder uses more than its lease.
type OverrunAction string

// Overrun actions.
const (
	OverrunWarn OverrunAction = "warn"
	OverrunKill OverrunAction = "kill"
)

// UnmarshalText implements encoding.TextUnmarshaler.
func (o *OverrunAction) UnmarshalText(b []byte) error {
	v, err := confval.Enum(string(b), "warn", "kill")
	*o = OverrunAction(v)
	return err
}

// DefaultConfig is the built-in [placement] section.
func DefaultConfig() Config {
	return Config{
		Policy:         PolicySpread,
		SafetyFactor:   0.95,
		Reserved:       units.Bytes(512 * units.MiB),
		ReservedPerGPU: map[string]units.Bytes{},
		MinFreeWarn:    units.Bytes(2 * units.GiB),
		Score:          ScoreWeights{Memory: 0.4, Utilization: 0.3, Temperature: 0.2, Priority: 0.1, TemperatureLimit: 85},

		FairShareHalfLife: units.Duration(time.Hour),
	}
}

// DefaultLeaseConfig is the built-in [leases] section.
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{
		DefaultMemory:    units.Bytes(2 * units.GiB),
		DefaultTTL:       units.Duration(60 * time.Second),
		MaxTTL:           units.Duration(24 * time.Hour),
		MaxWait:          units.Duration(10 * time.Minute),
		BackfillWindow:   units.Duration(30 * time.Second),
		Aging:            units.Duration(60 * time.Second),
		ReclaimWait:      units.Duration(30 * time.Second),
		MaxQueue:         512,
		OverrunTolerance: 0.10,
		Overrun:          OverrunWarn,
	}
}

// ReservedFor returns the reserved bytes for the GPU with the given index and
// UUID: a per-UUID entry wins over a per-index entry over the default.
func (c Config) ReservedFor(index int, uuid string) int64 {
	if v, ok := c.ReservedPerGPU[uuid]; ok && uuid != "" {
		return int64(v)
	}
	if v, ok := c.ReservedPerGPU[fmt.Sprint(index)]; ok {
		return int64(v)
	}
	return int64(c.Reserved)
}

// Validate checks what decoding cannot; errors are *confval.KeyError with
// keys relative to [placement].
func (c Config) Validate() error {
	if err := c.Policy.Check(); err != nil {
		return err
	}
	if c.SafetyFactor <= 0 {
		return confval.Bad("safety_factor", "0 is not allowed: want a number above 0 and at most 1")
	}
	for k := range c.ReservedPerGPU {
		s, err := device.Parse(k)
		isIndex := k != "" && strings.TrimLeft(k, "0123456789") == ""
		if !isIndex && (err != nil || s.Kind != device.UUID) {
			return confval.Bad("reserved_per_gpu", "key %q is not allowed: want a GPU index (\"0\") or UUID", k)
		}
	}
	if c.FairShareHalfLife <= 0 {
		return confval.Bad("fair_share_half_life", "%s is not allowed: want a duration above 0", c.FairShareHalfLife)
	}
	w := c.Score
	if w.Memory+w.Utilization+w.Temperature+w.Priority == 0 {
		return confval.Bad("score", "all weights are 0: want at least one above 0")
	}
	if w.TemperatureLimit <= 0 || w.TemperatureLimit > 150 {
		return confval.Bad("score.temperature_limit", "%d is not allowed: want 1 to 150 (°C)", w.TemperatureLimit)
	}
	return nil
}

// Validate checks what decoding cannot; errors are *confval.KeyError with
// keys relative to [leases].
func (l LeaseConfig) Validate() error {
	switch {
	case l.Overrun != OverrunWarn && l.Overrun != OverrunKill: // not taken for warn
		return confval.Bad("overrun", "%q is not allowed: want warn or kill", string(l.Overrun))
	case l.DefaultTTL <= 0:
		return confval.Bad("default_ttl", "%s is not allowed: want a duration above 0", l.DefaultTTL)
	case l.MaxTTL < l.DefaultTTL:
		return confval.Bad("max_ttl", "%s is less than default_ttl (%s)", l.MaxTTL, l.DefaultTTL)
	case l.MaxQueue < 1 || l.MaxQueue > 1_000_000:
		return confval.Bad("max_queue", "%d is not allowed: want 1 to 1000000", l.MaxQueue)
	case l.Aging <= 0:
		return confval.Bad("aging", "%s is not allowed: want a duration above 0", l.Aging)
	case l.ReclaimWait <= 0:
		return confval.Bad("reclaim_wait", "%s is not allowed: want a duration above 0", l.ReclaimWait)
	}
	return nil
}
