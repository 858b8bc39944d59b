package inventory

import (
	"fmt"
	"log/slog"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Open returns the provider that cfg selects. For "auto" it tries NVML and
// falls back to none with one warning. For "sim" the returned *Sim lets the
// caller change the simulated machine; it is nil for other providers.
func Open(cfg Config, log *slog.Logger) (Provider, *Sim, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch cfg.Provider {
	case ProviderNone:
		return NewNone(), nil, nil
	case ProviderSim:
		sim := NewSim(cfg.Sim)
		p, err := NewNVML(sim.Interface(), WithName("sim"))
		if err != nil {
			return nil, nil, fmt.Errorf("open sim inventory: %w", err)
		}
		return p, sim, nil
	case ProviderNVML:
		p, err := NewNVML(realNVML(cfg))
		if err != nil {
			return nil, nil, fmt.Errorf("open NVML inventory: %w", err)
		}
		return p, nil, nil
	default: // auto
		p, err := NewNVML(realNVML(cfg))
		if err != nil {
			log.Warn("no NVIDIA GPUs: running CPU-only", "reason", err.Error())
			return NewNone(), nil, nil
		}
		return p, nil, nil
	}
}

func realNVML(cfg Config) nvml.Interface {
	if cfg.NVMLLibrary != "" {
		return nvml.New(nvml.WithLibraryPath(cfg.NVMLLibrary))
	}
	return nvml.New()
}
