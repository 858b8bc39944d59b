// Package deviceplugin is `wsched k8s device-plugin`: a kubelet device plugin
// (API v1beta1) that advertises this node's GPU memory as extended resource
// wsched.io/gpu-memory and turns each container's allocation into a lease of
// the local wsched daemon, held until the pod is gone. It talks to the daemon
// only through its Unix-socket API (daemon/client).
package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// ResourceName is the extended resource the plugin advertises.
const ResourceName = "wsched.io/gpu-memory"

// Endpoint is the plugin's socket, in the kubelet's device-plugin directory.
const Endpoint = "wsched.sock"

// Labels on the leases the plugin holds: whose they are and which of the
// advertised device IDs (units) the kubelet gave the container.
const (
	LabelResource = "k8s.resource"
	LabelDevices  = "k8s.devices"
)

// Sentinel errors.
var (
	// ErrBadRequest is an Allocate the plugin cannot serve as asked.
	ErrBadRequest = errors.New("bad allocate request")
	// ErrNoMemory means no GPU has room for the units a container asks for.
	ErrNoMemory = errors.New("no GPU has room")
)

// Daemon is what the plugin needs of the local wsched daemon;
// *client.Client implements it.
type Daemon interface {
	Status(ctx context.Context) (api.Status, error)
	GPUs(ctx context.Context) (api.GPUs, error)
	Leases(ctx context.Context) ([]api.Lease, error)
	Acquire(ctx context.Context, req api.LeaseRequest) (api.Lease, error)
	Renew(ctx context.Context, id string, ttl time.Duration) (api.Lease, error)
	Release(ctx context.Context, id string) (api.Lease, error)
	AddPID(ctx context.Context, id string, pid int) (api.Lease, error)
}

var _ Daemon = (*client.Client)(nil)

// Options configures a Plugin. Daemon and Unit are required.
type Options struct {
	Daemon Daemon
	Log    *slog.Logger
	// Unit is the memory of one unit of ResourceName, in bytes.
	Unit int64
	// Interval is how often GPUs are re-read and pods reconciled.
	Interval time.Duration
	// LeaseTTL is the TTL of pods' leases, renewed every Interval.
	LeaseTTL time.Duration
	// Grace spares leases younger than this from release: the kubelet
	// records an allocation only after Allocate returns.
	Grace time.Duration
	// PluginDir holds the kubelet's registration socket (kubelet.sock) and
	// the plugin's own (Endpoint); default pluginapi.DevicePluginPath.
	PluginDir string
	// PodResources is the kubelet's pod-resources socket; default
	// /var/lib/kubelet/pod-resources/kubelet.sock.
	PodResources string
	// DevRoot is where the NVIDIA device nodes are looked for ("/dev").
	DevRoot string
	// ProcRoot is where processes' environments are read ("/proc").
	ProcRoot string
}

// DefaultPodResources is the kubelet's pod-resources socket.
const DefaultPodResources = "/var/lib/kubelet/pod-resources/kubelet.sock"

// Plugin is one device plugin; Run serves it.
type Plugin struct {
	opts Options
	log  *slog.Logger
	d    Daemon

	mu      sync.Mutex
	devices []*pluginapi.Device
	gpus    api.GPUs
	changed chan struct{} // closed (and replaced) when devices change

	kick    chan struct{} // asks the loop for a reconciliation now
	allocMu sync.Mutex    // one Allocate at a time: release-then-acquire
}

// New checks opts and fills in defaults.
func New(opts Options) (*Plugin, error) {
	if opts.Daemon == nil || opts.Unit <= 0 {
		return nil, fmt.Errorf("device plugin: %w: need a daemon and a unit above 0", ErrBadRequest)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 10 * time.Minute
	}
	if opts.PluginDir == "" {
		opts.PluginDir = pluginapi.DevicePluginPath
	}
	if opts.PodResources == "" {
		opts.PodResources = DefaultPodResources
	}
	if opts.DevRoot == "" {
		opts.DevRoot = "/dev"
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	return &Plugin{opts: opts, log: opts.Log, d: opts.Daemon, changed: make(chan struct{}), kick: make(chan struct{}, 1)}, nil
}

func (p *Plugin) kubeletSocket() string { return filepath.Join(p.opts.PluginDir, "kubelet.sock") }
func (p *Plugin) socket() string        { return filepath.Join(p.opts.PluginDir, Endpoint) }

// current returns the advertised devices and a channel closed when they
// change.
func (p *Plugin) current() ([]*pluginapi.Device, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.devices, p.changed
}

// refresh re-reads the GPUs and publishes the device list when it changed.
func (p *Plugin) refresh(ctx context.Context) error {
	gpus, err := p.d.GPUs(ctx)
	if err != nil {
		return fmt.Errorf("read GPUs: %w", err)
	}
	devs := deviceList(gpus, p.opts.Unit)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gpus = gpus
	if p.devices != nil && sameDevices(p.devices, devs) {
		return nil
	}
	p.log.Info("advertising", "resource", ResourceName, "units", healthy(devs), "devices", len(devs))
	p.devices = devs
	close(p.changed)
	p.changed = make(chan struct{})
	return nil
}

// reconcileSoon asks the loop for a reconciliation without waiting.
func (p *Plugin) reconcileSoon() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// loop refreshes and reconciles every Interval and when kicked.
func (p *Plugin) loop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := p.refresh(ctx); err != nil {
				p.log.Warn("refresh failed", "err", err)
			}
			p.reconcileLogged(ctx)
			t.Reset(p.opts.Interval)
		case <-p.kick:
			p.reconcileLogged(ctx)
		}
	}
}

func (p *Plugin) reconcileLogged(ctx context.Context) {
	if err := p.reconcile(ctx); err != nil && ctx.Err() == nil {
		p.log.Warn("reconcile failed", "err", err)
	}
}
