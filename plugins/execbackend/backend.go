package execbackend

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/wsched/wsched/plugins"
)

// Options configure a Backend.
type Options struct {
	Log     *slog.Logger
	Version string
	// Environ is the environment the app starts from (os.Environ when
	// nil): under the daemon, the lease's.
	Environ func() []string
	// StopGrace is how long an app gets between SIGTERM and SIGKILL.
	StopGrace time.Duration
}

// Backend is an existing app as a plugins.Backend. It runs at most one app
// at a time and forwards up to the app's max_streams Transcribe calls to it
// at once, in parallel (the app decides how it serves them); further calls
// wait.
type Backend struct {
	opts   Options
	log    *slog.Logger
	client *http.Client // keeps connections to the app alive between calls

	mu      sync.Mutex
	app     *app // nil when none runs
	device  string
	streams chan struct{} // the app's max_streams places; one per call forwarded
}

var _ plugins.Backend = (*Backend)(nil)

// New returns a Backend with no app running.
func New(opts Options) *Backend {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = defaultStopGracePeriod
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil              // the app is on loopback: never through an HTTP proxy
	tr.MaxIdleConnsPerHost = 64 // an app's streams keep their connections
	return &Backend{opts: opts, log: opts.Log, client: &http.Client{Transport: tr}}
}

// Info describes the backend and, once loaded, the app: its command, port,
// device, and the processes of its group (Info.PIDs).
func (b *Backend) Info(context.Context) (plugins.Info, error) {
	version := b.opts.Version
	if version == "" {
		version = "dev"
	}
	info := plugins.Info{Name: Name, Version: version, ModelFormats: []string{"command"}, Devices: []string{"cpu", "cuda"},
		Metadata: map[string]string{"protocols": ProtocolOpenAI + "," + ProtocolMultipart}, Descriptor: Descriptor()}
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		info.Metadata["env.CUDA_VISIBLE_DEVICES"] = v
	}
	b.mu.Lock()
	a, dev := b.app, b.device
	b.mu.Unlock()
	if a != nil && !a.exited() {
		info.Metadata["app"], info.Metadata["command"], info.Metadata["dir"] = a.s.Name, a.s.commandLine(), a.s.Dir
		info.Metadata["url"], info.Metadata["device"], info.Metadata["pid"] = a.base, dev, strconv.Itoa(a.pid)
		info.Metadata["protocol"] = a.s.Protocol
		info.Metadata["max_streams"] = strconv.Itoa(a.s.MaxStreams)
		info.PIDs = groupPIDs(a.pid)
	}
	return info, nil
}

// Load starts the app (stopping one already running) and waits until its
// health route answers. An app that exits or stays unhealthy fails the
// load with plugins.ErrBadModel and the app's last output lines.
func (b *Backend) Load(ctx context.Context, req plugins.LoadRequest) (plugins.MemoryReport, error) {
	s, err := ParseSettings(req)
	if err != nil {
		return plugins.MemoryReport{}, fmt.Errorf("exec backend: load: %w", err)
	}
	if req.VADModelPath != "" {
		return plugins.MemoryReport{}, fmt.Errorf("exec backend: app %q: %w: a VAD model was given, but the app gets the audio as it is: remove vad_model", s.Name, plugins.ErrBadRequest)
	}
	if err := b.Unload(ctx); err != nil {
		return plugins.MemoryReport{}, err
	}
	port, err := freePort()
	if err != nil {
		return plugins.MemoryReport{}, fmt.Errorf("exec backend: %w", err)
	}
	a, err := startApp(s, s.envList(b.opts.Environ(), req.Device, port), port, b.log)
	if err != nil {
		return plugins.MemoryReport{}, fmt.Errorf("exec backend: %w: %w", plugins.ErrBadModel, err)
	}
	if err := a.waitHealthy(ctx, b.client); err != nil {
		a.stop(context.Background(), b.opts.StopGrace)
		if ctx.Err() != nil {
			return plugins.MemoryReport{}, fmt.Errorf("exec backend: %w", ctx.Err())
		}
		return plugins.MemoryReport{}, fmt.Errorf("exec backend: %w: %w", plugins.ErrBadModel, err)
	}
	b.mu.Lock()
	b.app, b.device, b.streams = a, req.Device, make(chan struct{}, s.MaxStreams)
	b.mu.Unlock()
	b.log.Info("app serving", "app", s.Name, "pid", a.pid, "url", a.base, "device", req.Device, "max_streams", s.MaxStreams)
	// The app's memory is its own business: the lease (the entry's memory)
	// is all that is known, and NVML readings of its processes the rest.
	return plugins.MemoryReport{}, nil
}

// Unload stops the app's process group; nothing running is not an error.
func (b *Backend) Unload(ctx context.Context) error {
	b.mu.Lock()
	a := b.app
	b.app = nil
	b.mu.Unlock()
	if a != nil {
		a.stop(ctx, b.opts.StopGrace)
		b.client.CloseIdleConnections()
		b.log.Info("app stopped", "app", a.s.Name, "pid", a.pid)
	}
	return nil
}

// Close stops the app; for the binary's exit paths.
func (b *Backend) Close() { _ = b.Unload(context.Background()) }

// Health fails when no app runs, it exited, or its health route does not
// answer 2xx.
func (b *Backend) Health(ctx context.Context) error {
	a, err := b.running()
	if err != nil {
		return err
	}
	if err := a.probe(ctx, b.client, a.base+a.s.Health); err != nil {
		if a.exited() {
			return fmt.Errorf("exec backend: %w: %s", plugins.ErrUnavailable, a.exitNote())
		}
		return fmt.Errorf("exec backend: %w: %s: health %s: %w", plugins.ErrUnavailable, a.describe(), a.s.Health, err)
	}
	return nil
}

// running returns the app, or why there is none.
func (b *Backend) running() (*app, error) {
	a, _, err := b.runningStreams()
	return a, err
}

// runningStreams returns the app and its stream places.
func (b *Backend) runningStreams() (*app, chan struct{}, error) {
	b.mu.Lock()
	a, streams := b.app, b.streams
	b.mu.Unlock()
	switch {
	case a == nil:
		return nil, nil, fmt.Errorf("exec backend: %w: no app running", plugins.ErrNotLoaded)
	case a.exited():
		return nil, nil, fmt.Errorf("exec backend: %w: %s", plugins.ErrUnavailable, a.exitNote())
	}
	return a, streams, nil
}
