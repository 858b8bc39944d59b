package config

import (
	"time"

	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// DefaultModelsURL is [models] url: the whisper.cpp model
// repository on Hugging Face.
const DefaultModelsURL = "https://huggingface.co/ggerganov/whisper.cpp/resolve/main"

// Defaults returns the built-in configuration. wsched.toml at the repository
// root documents the same values; a test keeps them equal.
func Defaults() *Config {
	c := &Config{
		Daemon: Daemon{
			SocketMode:  0o660,
			SocketGroup: "wsched",
			LogLevel:    "info",
			LogFormat:   "text",
		},
		Inventory: inventory.DefaultConfig(),
		Placement: placement.DefaultConfig(),
		Leases:    placement.DefaultLeaseConfig(),
		Estimator: Estimator{},
		Backends: Backends{
			PluginDir:      "/usr/lib/wsched/plugins",
			DevDirs:        []string{"./bin"},
			KeepAlive:      units.Duration(5 * time.Minute),
			MaxKeepAlive:   units.Duration(time.Hour),
			HealthInterval: units.Duration(30 * time.Second),
			StartTimeout:   units.Duration(time.Minute),
			MaxRestarts:    3,
		},
		Jobs: Jobs{
			MaxRetries: 3,
			Timeout:    units.Duration(time.Hour),
			ResultTTL:  units.Duration(24 * time.Hour),
			MaxActive:  64,
			MaxUpload:  units.Bytes(1 * units.GiB),
			// length-aware order (jobs/order.go)
			MaxReorderWait: units.Duration(2 * time.Minute),
			// the short-job reserve (jobs/reserve.go): an eighth of max_active
			ShortReserve: 8,
			ShortAudio:   units.Duration(time.Minute),
		},
		Models: Models{
			URL:     DefaultModelsURL,
			Default: "base",
		},
		Kubernetes: defaultKubernetes(),
		Limits:     defaultLimits(),
	}
	c.Enforcement = defaultEnforcement()
	connDefaults(&c.Daemon)
	spoolDefaults(&c.Jobs)
	jobTableDefaults(&c.Jobs, &c.Limits)
	return c
}
