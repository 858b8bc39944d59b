// Package config loads wsched.toml: strict decoding (unknown keys and bad
// values are errors that name the key and line), built-in defaults, and the
// WSCHED_* environment overrides. The annotated default file is wsched.toml
// at the repository root; TestDefaultFileMatchesDefaults keeps the two equal.
package config

import (
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
)

// Config is the whole configuration. Each field is one TOML section.
type Config struct {
	Daemon    Daemon    `toml:"daemon"`
	Inventory Inventory `toml:"inventory"`
	Placement Placement `toml:"placement"`
	Leases    Leases    `toml:"leases"`
	Estimator Estimator `toml:"estimator"`
	Backends  Backends  `toml:"backends"`

	// Source is the file the config was read from ("" for built-in defaults).
	Source string `toml:"-"`
	// Device is the device pin from WSCHED_DEVICE / SENSEVOICE_DEVICE (Auto
	// when neither is set); DeviceVar names the variable that set it.
	Device    device.Spec `toml:"-"`
	DeviceVar string      `toml:"-"`
}

// Daemon is the [daemon] section.
type Daemon struct {
	// Socket is the Unix socket path; "" resolves to /run/wsched/wsched.sock
	// for root and $XDG_RUNTIME_DIR/wsched.sock otherwise.
	Socket string `toml:"socket"`
	// SocketMode is the socket file's permission bits, octal ("0660").
	SocketMode FileMode `toml:"socket_mode"`
	// SocketGroup owns the socket file when that group exists.
	SocketGroup string `toml:"socket_group"`
	// StateDir holds the daemon's database; "" resolves to /var/lib/wsched
	// for root and $XDG_STATE_HOME/wsched (~/.local/state/wsched) otherwise.
	StateDir string `toml:"state_dir"`
	// LogLevel is debug, info, warn or error.
	LogLevel LogLevel `toml:"log_level"`
	// LogFormat is text or json.
	LogFormat LogFormat `toml:"log_format"`
	// HTTPListen is an optional TCP address (host:port) for clients that
	// cannot use the Unix socket; "" turns it off.
	HTTPListen string `toml:"http_listen"`
	// HTTPToken is the bearer token the TCP listener requires.
	HTTPToken string `toml:"http_token"`
}

// Inventory is the [inventory] section.
type Inventory struct {
	// Provider is auto, nvml, sim or none.
	Provider Provider `toml:"provider"`
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

// Placement is the [placement] section.
type Placement struct {
	// Policy is spread, binpack or score.
	Policy Policy `toml:"policy"`
	// SafetyFactor scales (total − reserved) into usable memory, in (0, 1].
	SafetyFactor Fraction `toml:"safety_factor"`
	// Reserved is held back on every GPU unless ReservedPerGPU says otherwise.
	Reserved units.Bytes `toml:"reserved"`
	// ReservedPerGPU overrides Reserved by GPU index ("0") or UUID.
	ReservedPerGPU map[string]units.Bytes `toml:"reserved_per_gpu"`
	// MinFreeWarn warns when a GPU's available memory falls below it.
	MinFreeWarn units.Bytes `toml:"min_free_warn"`
	// Score holds the weights of the score policy.
	Score ScoreWeights `toml:"score"`
}

// ScoreWeights is the [placement.score] section: the seed's weighted score.
type ScoreWeights struct {
	Memory      Fraction `toml:"memory"`
	Utilization Fraction `toml:"utilization"`
	Temperature Fraction `toml:"temperature"`
	Priority    Fraction `toml:"priority"`
	// TemperatureLimit is the temperature (°C) at which headroom reaches 0.
	TemperatureLimit int `toml:"temperature_limit"`
}

// Leases is the [leases] section.
type Leases struct {
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
	// MaxQueue bounds the number of waiting requests.
	MaxQueue int `toml:"max_queue"`
	// OverrunTolerance is the fraction a holder may exceed its lease by.
	OverrunTolerance Fraction `toml:"overrun_tolerance"`
	// Overrun is warn or kill.
	Overrun OverrunAction `toml:"overrun"`
}

// Estimator is the [estimator] section.
type Estimator struct {
	// CUDAContext is the per-process CUDA context before any learning.
	CUDAContext units.Bytes `toml:"cuda_context"`
}

// Backends is the [backends] section.
type Backends struct {
	// PluginDir holds drop-in backends named wsched-backend-NAME.
	PluginDir string `toml:"plugin_dir"`
	// MaxRetries is how often a job is retried after a backend crash or a
	// CUDA out-of-memory error.
	MaxRetries int `toml:"max_retries"`
	// JobTimeout bounds one attempt of a job, queueing included.
	JobTimeout units.Duration `toml:"job_timeout"`
	// ResultTTL is how long finished jobs and their results are kept.
	ResultTTL units.Duration `toml:"result_ttl"`
	// MaxActiveJobs bounds the jobs placed at once; more wait by priority.
	MaxActiveJobs int `toml:"max_active_jobs"`
	// MaxUpload bounds an uploaded audio file.
	MaxUpload units.Bytes `toml:"max_upload"`
	// DefaultModel serves requests for OpenAI's "whisper-1" and jobs that
	// name no model.
	DefaultModel string `toml:"default_model"`
	// DevDirs are searched after PluginDir (developer builds); relative
	// paths are resolved against the daemon's working directory.
	DevDirs []string `toml:"dev_dirs"`
	// KeepAlive is how long a loaded backend stays warm after its last use
	// (a request may override it).
	KeepAlive units.Duration `toml:"keep_alive"`
	// MaxKeepAlive caps the keep-alive a job may ask for.
	MaxKeepAlive units.Duration `toml:"max_keep_alive"`
	// HealthInterval is how often idle backends are health-checked and
	// their leases renewed.
	HealthInterval units.Duration `toml:"health_interval"`
	// StartTimeout bounds a backend's start-up handshake.
	StartTimeout units.Duration `toml:"start_timeout"`
	// MaxRestarts is how often a crashed backend is restarted under the
	// same lease before it is given up.
	MaxRestarts int `toml:"max_restarts"`
	// ModelsDir is scanned for whisper.cpp models named ggml-NAME.bin, served
	// as model NAME; `wsched models pull` downloads into it. "" resolves to
	// /var/lib/wsched/models for root and $XDG_DATA_HOME/wsched/models
	// (~/.local/share/wsched/models) otherwise.
	ModelsDir string `toml:"models_dir"`
	// ModelsURL is the base URL `wsched models pull NAME` fetches
	// ModelsURL/ggml-NAME.bin from.
	ModelsURL string `toml:"models_url"`
	// Models are the [[backends.model]] entries; an entry wins over a file
	// of the same name in ModelsDir.
	Models []Model `toml:"model"`
}

// Model is one [[backends.model]] entry: a model served under Name by
// Backend from the file or directory at Path.
type Model struct {
	Name    string `toml:"name"`
	Backend string `toml:"backend"`
	Path    string `toml:"path"`
	// Memory is the lease an instance of this model gets; needed for
	// backends the estimator has no profile for, and overrides the estimate
	// for the others. 0 (or absent): estimate.
	Memory units.Bytes `toml:"memory"`
}
