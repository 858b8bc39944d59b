package inventory

import (
	"fmt"
	"time"

	"github.com/wsched/wsched/internal/confval"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
)

// Config is the [inventory] section of wsched.toml.
type Config struct {
	// Provider is auto, nvml, sim or none.
	Provider ProviderName `toml:"provider"`
	// MaxAge is how old a snapshot may be before a placement decision
	// refreshes it.
	MaxAge units.Duration `toml:"max_age"`
	// RefreshInterval is how often the daemon re-reads the GPUs to reconcile
	// leases with measured use and notice memory freed by other processes.
	RefreshInterval units.Duration `toml:"refresh_interval"`
	// NVMLLibrary overrides the path of libnvidia-ml.so.1 ("" = default search).
	NVMLLibrary string `toml:"nvml_library"`
	// Sim declares the simulated GPUs for provider "sim".
	Sim []SimGPU `toml:"sim"`
}

// SimGPU is one [[inventory.sim]] entry.
type SimGPU struct {
	Name        string       `toml:"name"`
	UUID        string       `toml:"uuid"`
	Memory      units.Bytes  `toml:"memory"`
	Used        *units.Bytes `toml:"used"`
	Temperature int          `toml:"temperature"`
	Utilization int          `toml:"utilization"`
	Processes   []SimProcess `toml:"process"`
	MIG         bool         `toml:"mig"`
}

// SimProcess is a foreign compute process on a simulated GPU.
type SimProcess struct {
	PID  int         `toml:"pid"`
	Name string      `toml:"name"`
	Used units.Bytes `toml:"used"`
}

// ProviderName names the source of GPU readings.
type ProviderName string

// Inventory providers.
const (
	ProviderAuto ProviderName = "auto"
	ProviderNVML ProviderName = "nvml"
	ProviderSim  ProviderName = "sim"
	ProviderNone ProviderName = "none"
)

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *ProviderName) UnmarshalText(b []byte) error {
	v, err := confval.Enum(string(b), "auto", "nvml", "sim", "none")
	*p = ProviderName(v)
	return err
}

// DefaultConfig is the built-in [inventory] section.
func DefaultConfig() Config {
	return Config{
		Provider:        ProviderAuto,
		MaxAge:          units.Duration(500 * time.Millisecond),
		RefreshInterval: units.Duration(time.Second),
	}
}

// Validate checks what decoding cannot; errors are *confval.KeyError with
// keys relative to [inventory].
func (c Config) Validate() error {
	if c.RefreshInterval < units.Duration(100*time.Millisecond) {
		return confval.Bad("refresh_interval", "%s is not allowed: want at least 100ms", c.RefreshInterval)
	}
	if c.Provider == ProviderSim && len(c.Sim) == 0 {
		return confval.Bad("provider", `"sim" needs at least one [[inventory.sim]] GPU`)
	}
	for i, g := range c.Sim {
		if err := g.validate(fmt.Sprintf("sim#%d", i)); err != nil {
			return err
		}
	}
	return nil
}

func (g SimGPU) validate(key string) error {
	if g.Memory <= 0 {
		return confval.Bad(key+".memory", "%s is not allowed: want a size above 0B", g.Memory.Exact())
	}
	if err := g.validateUse(key); err != nil {
		return err
	}
	if g.Temperature < 0 || g.Temperature > 150 {
		return confval.Bad(key+".temperature", "%d is not allowed: want 0 to 150 (°C)", g.Temperature)
	}
	if g.Utilization < 0 || g.Utilization > 100 {
		return confval.Bad(key+".utilization", "%d is not allowed: want 0 to 100 (%%)", g.Utilization)
	}
	if g.UUID != "" {
		if s, err := device.Parse(g.UUID); err != nil || s.Kind != device.UUID {
			return confval.Bad(key+".uuid", "%q is not allowed: want a GPU UUID such as \"GPU-5a1c0a4e-…\"", g.UUID)
		}
	}
	return nil
}

// validateUse checks the processes and the used figure against memory.
func (g SimGPU) validateUse(key string) error {
	var procs int64
	for j, p := range g.Processes {
		if p.PID <= 0 {
			return confval.Bad(fmt.Sprintf("%s.process#%d.pid", key, j), "%d is not allowed: want a PID above 0", p.PID)
		}
		procs += int64(p.Used)
	}
	if g.Used != nil {
		if *g.Used > g.Memory {
			return confval.Bad(key+".used", "%s is more than memory (%s)", g.Used.Exact(), g.Memory.Exact())
		}
		if int64(*g.Used) < procs {
			return confval.Bad(key+".used", "%s is less than its processes use (%s)", g.Used.Exact(), units.Bytes(procs).Exact())
		}
	} else if procs > int64(g.Memory) {
		return confval.Bad(key+".process", "processes use %s, more than memory (%s)", units.Bytes(procs).Exact(), g.Memory.Exact())
	}
	return nil
}
