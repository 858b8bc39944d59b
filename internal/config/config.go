// Package config loads wsched.toml: strict decoding (unknown keys and bad
// values are errors that name the key and line), built-in defaults, and the
// WSCHED_* environment overrides. The annotated default file is wsched.toml
// at the repository root; TestDefaultFileMatchesDefaults keeps the two equal.
package config

import (
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// Config is the whole configuration. Each field is one TOML section.
type Config struct {
	Daemon     Daemon                `toml:"daemon"`
	Inventory  inventory.Config      `toml:"inventory"`
	Placement  placement.Config      `toml:"placement"`
	Leases     placement.LeaseConfig `toml:"leases"`
	Estimator  Estimator             `toml:"estimator"`
	Backends   Backends              `toml:"backends"`
	Jobs       Jobs                  `toml:"jobs"`
	Limits     Limits                `toml:"limits"`
	Models     Models                `toml:"models"`
	Kubernetes Kubernetes            `toml:"kubernetes"`

	// Enforcement is [enforcement] (issue 27).
	Enforcement Enforcement `toml:"enforcement"`

	// Source is the file the config was read from ("" for built-in defaults).
	Source string `toml:"-"`
	// Device is the device pin from WSCHED_DEVICE / SENSEVOICE_DEVICE (Auto
	// when neither is set); DeviceVar names the variable that set it.
	Device    device.Spec `toml:"-"`
	DeviceVar string      `toml:"-"`
	// Deprecations lists the old keys the file set (still applied to
	// their new keys); the daemon logs them and `wsched config check`
	// prints them.
	Deprecations []Deprecation `toml:"-"`
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
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout units.Duration `toml:"idle_timeout"`
	// HeaderTimeout bounds reading a request's headers.
	HeaderTimeout units.Duration `toml:"header_timeout"`
	// BodyTimeout bounds reading a request's body (uploads: [jobs]
	// upload_timeout).
	BodyTimeout units.Duration `toml:"body_timeout"`
	// WriteTimeout bounds writing an answer, and each event of a stream.
	WriteTimeout units.Duration `toml:"write_timeout"`
	// MaxConnections bounds the open connections of the Unix socket;
	// beyond it new ones are answered 503 and closed. 0: no limit.
	MaxConnections int `toml:"max_connections"`
	// MaxConnectionsPerUID bounds the Unix-socket connections of one uid
	// (SO_PEERCRED at accept; root is not limited); beyond it new ones are
	// answered 429 and closed. 0: no limit.
	MaxConnectionsPerUID int `toml:"max_connections_per_uid"`
	// TCPMaxConnections bounds the open connections of the TCP listener,
	// a budget of its own: clients without the token cannot take the
	// Unix socket's. 0: no limit.
	TCPMaxConnections int `toml:"tcp_max_connections"`
	// TCPHeaderTimeout bounds reading a request's headers on the TCP
	// listener, where they carry the token: a connection that does not
	// authenticate within it is closed.
	TCPHeaderTimeout units.Duration `toml:"tcp_header_timeout"`
}

// Estimator is the [estimator] section.
type Estimator struct {
	// CUDAContext is the per-process CUDA context before any learning; ""
	// (0) means by GPU: the estimator's overhead row for the GPU model.
	CUDAContext units.OptionalBytes `toml:"cuda_context"`
}

// Backends is the [backends] section: where backends are found and how
// their processes are kept.
type Backends struct {
	// PluginDir holds drop-in backends named wsched-backend-NAME.
	PluginDir string `toml:"plugin_dir"`
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
}

// Jobs is the [jobs] section (formerly part of [backends]).
type Jobs struct {
	// MaxRetries is how often a job is retried after a backend crash or a
	// CUDA out-of-memory error (was [backends] max_retries).
	MaxRetries int `toml:"max_retries"`
	// Timeout bounds one attempt of a job, queueing included (was
	// [backends] job_timeout).
	Timeout units.Duration `toml:"timeout"`
	// ResultTTL is how long finished jobs and their results are kept.
	ResultTTL units.Duration `toml:"result_ttl"`
	// MaxActive bounds the jobs placed at once; more wait by priority (was
	// [backends] max_active_jobs).
	MaxActive int `toml:"max_active"`
	// MaxJobs bounds the jobs kept, all users together (pending, running
	// and finished until ResultTTL); beyond it submissions get 503.
	MaxJobs int `toml:"max_jobs"`
	// MaxSegments bounds the segments of one job's result; a backend that
	// returns more fails the job. 0: no limit.
	MaxSegments int `toml:"max_segments"`
	// MaxResultBytes bounds the text of one job's result (the transcript
	// and its segments' texts together); more fails the job. 0: no limit.
	MaxResultBytes units.Bytes `toml:"max_result_bytes"`
	// MaxUpload bounds an uploaded audio file.
	MaxUpload units.Bytes `toml:"max_upload"`
	// SpoolDir holds uploads (and audio copied from paths) until their
	// jobs end; "" is [daemon] state_dir/uploads.
	SpoolDir string `toml:"spool_dir"`
	// SpoolQuota bounds the bytes in SpoolDir together; 0: no quota.
	SpoolQuota units.Bytes `toml:"spool_quota"`
	// MinFreeDisk refuses uploads while the file system of the state
	// directory (or the spool) has less free space than this.
	MinFreeDisk units.Bytes `toml:"min_free_disk"`
	// UploadTimeout bounds reading one upload.
	UploadTimeout units.Duration `toml:"upload_timeout"`
	// MaxReorderWait bounds how long length-aware order may keep a queued
	// job behind shorter ones of its priority: past it, jobs go in arrival
	// order (aging). 0 turns the reordering off (arrival order).
	MaxReorderWait units.Duration `toml:"max_reorder_wait"`
	// ChunkOver cuts audio longer than this into chunks that run as
	// units of their own, on any GPU, and are stitched (jobs/chunks.go).
	// 0: never.
	ChunkOver units.Duration `toml:"chunk_over"`
	// ShortReserve keeps this many of the MaxActive slots for short jobs
	// (less audio than ShortAudio): long ones take the rest (jobs/reserve.go).
	// 0: none; at most an eighth of max_active.
	ShortReserve int `toml:"short_reserve"`
	// ShortAudio is the audio length below which a job is short.
	ShortAudio units.Duration `toml:"short_audio"`
}

// Models is the [models] section (formerly part of [backends]).
type Models struct {
	// Dir is scanned for whisper.cpp models named ggml-NAME.bin, served as
	// model NAME; `wsched models pull` downloads into it. "" resolves to
	// /var/lib/wsched/models for root and $XDG_DATA_HOME/wsched/models
	// (~/.local/share/wsched/models) otherwise. Was [backends] models_dir.
	Dir string `toml:"dir"`
	// URL is the base URL `wsched models pull NAME` fetches URL/ggml-NAME.bin
	// from (was [backends] models_url).
	URL string `toml:"url"`
	// Default serves requests for OpenAI's "whisper-1" and jobs that name no
	// model (was [backends] default_model).
	Default string `toml:"default"`
	// Entries are the [[models.model]] tables (formerly [[backends.model]]);
	// an entry wins over a file of the same name in Dir.
	Entries []Model `toml:"model"`
}

// Model is one [[models.model]] entry: a model served under Name by
// Backend from the file or directory at Path, or, for backend "exec", by an
// existing transcription server that Command starts (see Exec).
type Model struct {
	Name    string `toml:"name"`
	Backend string `toml:"backend"`
	// Path is the model file or directory; for backend "exec" the HTTP
	// route the app transcribes on (protocol "multipart", or a non-default
	// OpenAI route).
	Path string `toml:"path"`
	// Memory is the lease an instance of this model gets; needed for
	// backends the estimator has no profile for (exec: required), and
	// overrides the estimate for the others. 0 (or absent): estimate.
	Memory units.Bytes `toml:"memory"`
	// MaxStreams is how many jobs of this model one backend instance serves
	// at once, its lease growing by one stream's estimate per job (issue
	// 26). 0 (or absent): the backend's default (its descriptor's
	// max_streams); 1: one job per instance.
	MaxStreams int `toml:"max_streams"`
	// StreamMemory is what each stream after the first adds to an
	// instance's lease: for a backend without an estimator profile (an
	// exec app, whose memory is the whole instance) the operator says
	// it; for the others it overrides the estimator's per-stream part.
	// 0 (or absent): the estimate, else the whole memory per stream.
	StreamMemory units.Bytes `toml:"stream_memory"`
	// VAD turns voice activity detection on for this model's jobs unless a
	// job says otherwise; VADModel is the VAD model file (whisper.cpp: a
	// silero ggml file) and the VAD… keys tune it (0: backend default).
	VAD              bool           `toml:"vad"`
	VADModel         string         `toml:"vad_model"`
	VADThreshold     float64        `toml:"vad_threshold"`
	VADMinSpeech     units.Duration `toml:"vad_min_speech"`
	VADMinSilence    units.Duration `toml:"vad_min_silence"`
	VADMaxSpeech     units.Duration `toml:"vad_max_speech"`
	VADSpeechPadding units.Duration `toml:"vad_speech_pad"`
	// Language and ITN are a sherpa-onnx model's recognizer settings, fixed
	// when it loads: SenseVoice's language (auto, zh, en, ja, ko, yue;
	// default auto; a job that names a language gets an instance loaded for
	// it) and inverse text normalization (default on).
	Language string `toml:"language"`
	ITN      *bool  `toml:"itn"`

	// The keys below are read for backend "exec" only: an existing
	// transcription server started under the instance's lease.

	// Command starts the app (argv; the first element is looked up in PATH).
	Command []string `toml:"command"`
	// Dir is the app's working directory (absolute).
	Dir string `toml:"dir"`
	// Env is added to the lease's environment.
	Env map[string]string `toml:"env"`
	// Health is the route that answers 2xx once the app serves ("/health").
	Health string `toml:"health"`
	// Protocol is "openai" (POST multipart to /v1/audio/transcriptions,
	// verbose_json answer) or "multipart" (POST the file as Field to Path,
	// the text at TextJSONPath of the JSON answer).
	Protocol     string `toml:"protocol"`
	Field        string `toml:"field"`
	TextJSONPath string `toml:"text_json_path"`
	// StartTimeout bounds the wait for the app's health route (default 2m).
	StartTimeout units.Duration `toml:"start_timeout"`

	// Options are settings for the backend, passed to it when the model
	// loads; the backend's descriptor names and types them (wsched backends
	// lists them). The backend keys above are shorthands for options of the
	// same name.
	Options map[string]any `toml:"options"`
}
