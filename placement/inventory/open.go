package inventory

import (
	"fmt"
	"log/slog"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/wsched/wsched/internal/config"
)

// Open returns the provider that cfg selects. For "auto" it tries NVML and
// falls back to none with one warning. For "sim" the returned *Sim lets the
// caller change the simulated machine; it is nil for other providers.
func Open(cfg config.Inventory, log *slog.Logger) (Provider, *Sim, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch cfg.Provider {
	case config.ProviderNone:
		return NewNone(), nil, nil
	case config.ProviderSim:
		sim := NewSim(cfg.Sim)
		p, err := NewNVML(sim.Interface(), WithName("sim"))
		if err != nil {
			return nil, nil, fmt.Errorf("open sim inventory: %w", err)
		}
		return p, sim, nil
	case config.ProviderNVML:
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

func realNVML(cfg config.Inventory) nvml.Interface {
	if cfg.NVMLLibrary != "" {
		return nvml.New(nvml.WithLibraryPath(cfg.NVMLLibrary))
	}
	return nvml.New()
}
