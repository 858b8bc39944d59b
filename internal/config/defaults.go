package config

import (
	"time"

	"github.com/wsched/wsched/internal/units"
)

// DefaultModelsURL is [backends] models_url: the whisper.cpp model
// repository on Hugging Face.
const DefaultModelsURL = "https://huggingface.co/ggerganov/whisper.cpp/resolve/main"

// Defaults returns the built-in configuration. wsched.toml at the repository
// root documents the same values; a test keeps them equal.
func Defaults() *Config {
	return &Config{
		Daemon: Daemon{
			SocketMode:  0o660,
			SocketGroup: "wsched",
			LogLevel:    "info",
			LogFormat:   "text",
		},
		Inventory: Inventory{
			Provider:        ProviderAuto,
			MaxAge:          units.Duration(500 * time.Millisecond),
			RefreshInterval: units.Duration(time.Second),
		},
		Placement: Placement{
			Policy:         PolicySpread,
			SafetyFactor:   0.95,
			Reserved:       units.Bytes(512 * units.MiB),
			ReservedPerGPU: map[string]units.Bytes{},
			MinFreeWarn:    units.Bytes(2 * units.GiB),
			Score: ScoreWeights{
				Memory:           0.4,
				Utilization:      0.3,
				Temperature:      0.2,
				Priority:         0.1,
				TemperatureLimit: 85,
			},
		},
		Leases: Leases{
			DefaultMemory:    units.Bytes(2 * units.GiB),
			DefaultTTL:       units.Duration(60 * time.Second),
			MaxTTL:           units.Duration(24 * time.Hour),
			MaxWait:          units.Duration(10 * time.Minute),
			BackfillWindow:   units.Duration(30 * time.Second),
			Aging:            units.Duration(60 * time.Second),
			MaxQueue:         512,
			OverrunTolerance: 0.10,
			Overrun:          OverrunWarn,
		},
		Estimator: Estimator{
			CUDAContext: units.Bytes(400 * units.MiB),
		},
		Backends: Backends{
			PluginDir:      "/usr/lib/wsched/plugins",
			MaxRetries:     3,
			JobTimeout:     units.Duration(time.Hour),
			ResultTTL:      units.Duration(24 * time.Hour),
			MaxActiveJobs:  64,
			MaxUpload:      units.Bytes(1 * units.GiB),
			DefaultModel:   "base",
			DevDirs:        []string{"./bin"},
			KeepAlive:      units.Duration(5 * time.Minute),
			MaxKeepAlive:   units.Duration(time.Hour),
			HealthInterval: units.Duration(30 * time.Second),
			StartTimeout:   units.Duration(time.Minute),
			MaxRestarts:    3,
			ModelsURL:      DefaultModelsURL,
		},
		Kubernetes: defaultKubernetes(),
	}
}
