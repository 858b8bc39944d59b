// Package plugintest is test support for code that runs backends: Fake, a
// Backend whose behaviour is scripted by settings (environment variables or
// per-request options), and Build, which compiles it into a plugin binary.
// Nothing here belongs in a production build.
package plugintest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/wsched/wsched/plugins"
)

// Setting names. A setting is read from the request's Extra map under its
// name, else from the environment variable Env(name).
const (
	Segments        = "segments"         // segments per transcription (default 3)
	SegmentDelay    = "segment_delay"    // Go duration to wait before each segment
	CrashAfter      = "crash_after"      // crash after emitting this many segments
	CrashMode       = "crash_mode"       // exit (default, status 3), kill (SIGKILL) or panic
	Memory          = "memory"           // memory report, see ParseMemory
	LoadError       = "load_error"       // sentinel Load returns, see Sentinel
	TranscribeError = "transcribe_error" // sentinel Transcribe returns
	HealthError     = "health_error"     // sentinel Health returns
	Block           = "block"            // method that waits for its ctx: load, transcribe, unload, health
	EchoEnv         = "echo_env"         // comma-separated variables Info reports as env.NAME
	Progress        = "progress"         // the percent every progress event carries ("NaN", "Inf", "-5": a broken backend)
	// OOMBelow: Transcribe runs out of memory while the lease
	// (WSCHED_MEMORY_BYTES) is smaller than this many bytes.
	OOMBelow = "oom_below"
)

// DefaultEchoEnv is what Info echoes when echo_env is unset.
const DefaultEchoEnv = "CUDA_VISIBLE_DEVICES,CUDA_DEVICE_ORDER,SENSEVOICE_DEVICE"

// Env is the environment variable that holds setting name, e.g.
// Env(CrashAfter) = "WSCHED_FAKE_CRASH_AFTER".
func Env(name string) string { return "WSCHED_FAKE_" + strings.ToUpper(name) }

// EnvVar formats name=value as an environment entry for exec.Cmd.Env.
func EnvVar(name, value string) string { return Env(name) + "=" + value }

// Fake is a scripted Backend. It loads nothing: Load only checks that the
// model file exists and Transcribe that the audio file does.
type Fake struct {
	lookupEnv func(string) (string, bool)
	log       *slog.Logger

	mu     sync.Mutex
	model  string // loaded model path; "" when none
	device string
	vad    string // the VAD model given at load
}

var _ plugins.Backend = (*Fake)(nil)

// NewFake returns a Fake reading its settings through lookupEnv (os.LookupEnv
// in the binary, a map in tests) and logging to log.
func NewFake(lookupEnv func(string) (string, bool), log *slog.Logger) *Fake {
	return &Fake{lookupEnv: lookupEnv, log: log}
}

// setting returns the value of name from extra, else from the environment.
func (f *Fake) setting(name string, extra map[string]string) string {
	if v, ok := extra[name]; ok {
		return v
	}
	v, _ := f.lookupEnv(Env(name))
	return v
}

// Info reports the fake's identity, its PID, whether go-plugin's AutoMTLS
// handed it a client certificate, the loaded model and the echoed variables.
func (f *Fake) Info(ctx context.Context) (plugins.Info, error) {
	meta := map[string]string{"pid": fmt.Sprint(os.Getpid())}
	_, mtls := f.lookupEnv("PLUGIN_CLIENT_CERT")
	meta["mtls"] = fmt.Sprint(mtls)
	f.mu.Lock()
	meta["model"], meta["device"] = f.model, f.device
	f.mu.Unlock()
	names := f.setting(EchoEnv, nil)
	if names == "" {
		names = DefaultEchoEnv
	}
	for name := range strings.SplitSeq(names, ",") {
		if v, ok := f.lookupEnv(name); ok {
			meta["env."+name] = v
		}
	}
	return plugins.Info{
		Name:         "fake",
		Version:      "0.0.0-test",
		ModelFormats: []string{"fake"},
		Devices:      []string{"cpu", "cuda"},
		Metadata:     meta,
	}, nil
}

// Load checks the model file and returns the scripted memory report.
func (f *Fake) Load(ctx context.Context, req plugins.LoadRequest) (plugins.MemoryReport, error) {
	if err := f.script(ctx, "load", LoadError, req.Extra); err != nil {
		return plugins.MemoryReport{}, fmt.Errorf("fake load: %w", err)
	}
	if _, err := os.Stat(req.ModelPath); err != nil {
		return plugins.MemoryReport{}, fmt.Errorf("fake load: %w: %w", plugins.ErrModelNotFound, err)
	}
	rep, err := ParseMemory(f.setting(Memory, req.Extra))
	if err != nil {
		return plugins.MemoryReport{}, fmt.Errorf("fake load: %w: %w", plugins.ErrBadRequest, err)
	}
	f.mu.Lock()
	f.model, f.device, f.vad = req.ModelPath, req.Device, req.VADModelPath
	f.mu.Unlock()
	f.log.Info("loaded model", "model", req.ModelPath, "device", req.Device)
	return rep, nil
}

// Unload forgets the model.
func (f *Fake) Unload(ctx context.Context) error {
	if err := f.script(ctx, "unload", "", nil); err != nil {
		return fmt.Errorf("fake unload: %w", err)
	}
	f.mu.Lock()
	f.model, f.device = "", ""
	f.mu.Unlock()
	return nil
}

// Health fails with the scripted sentinel, if any.
func (f *Fake) Health(ctx context.Context) error {
	if err := f.script(ctx, "health", HealthError, nil); err != nil {
		return fmt.Errorf("fake health: %w", err)
	}
	return nil
}

// script blocks if the block setting names method, then returns the sentinel
// the errSetting names, if any.
func (f *Fake) script(ctx context.Context, method, errSetting string, extra map[string]string) error {
	if f.setting(Block, extra) == method {
		<-ctx.Done()
		return ctx.Err()
	}
	if errSetting == "" {
		return nil
	}
	if name := f.setting(errSetting, extra); name != "" {
		return Sentinel(name)
	}
	return nil
}

// crash ends the process the way mode says.
func crash(mode string) {
	switch mode {
	case "kill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	case "panic":
		panic("fake backend: scripted crash")
	}
	os.Exit(3)
}
