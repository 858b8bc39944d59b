// Package dra is `wsched k8s dra-driver`: a Kubernetes Dynamic Resource
// Allocation driver (kubelet plugin API dra/v1). It publishes each placeable
// GPU of this node as one device of a ResourceSlice with consumable capacity
// "memory" (KEP-5075: several claims share a GPU, the scheduler tracks what
// each consumed), and turns each prepared claim into a lease of the local
// wsched daemon of exactly the consumed memory on exactly the GPU the
// scheduler chose, its environment handed to the container through CDI. It
// records the claims it prepared in a checkpoint and, at start-up,
// reconciles that record, the daemon's leases and its CDI specs with the
// API server's claims (reconcile.go), so that a restart neither leaks the
// leases of claims unprepared meanwhile nor takes memory twice. It talks to
// the daemon only through its Unix-socket API and to the API server through
// the small Claims and Slices interfaces (apiserver.go implements them over
// plain HTTPS).
package dra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
)

// DriverName is the driver's name in ResourceSlices, DeviceClasses and the
// kubelet's plugin registry.
const DriverName = "gpu.wsched.io"

// CDIKind is the CDI kind of the devices the driver hands out:
// "wsched.io/claim=<device>".
const CDIKind = "wsched.io/claim"

// Labels on the leases the driver holds.
const (
	LabelClaim   = "k8s.claim"   // the claim's UID
	LabelRequest = "k8s.request" // the claim's request name
	LabelDevice  = "k8s.device"  // the published device (gpu-<index>)
	LabelShare   = "k8s.share"   // the allocation's share ID, when it has one
)

// HolderName is the holder name of the driver's leases.
const HolderName = "kubernetes-dra"

// ErrBadRequest is a claim the driver cannot serve as asked.
var ErrBadRequest = errors.New("bad claim")

// Daemon is what the driver needs of the local wsched daemon;
// *client.Client implements it.
type Daemon interface {
	Status(ctx context.Context) (api.Status, error)
	GPUs(ctx context.Context) (api.GPUs, error)
	Leases(ctx context.Context) ([]api.Lease, error)
	Acquire(ctx context.Context, req api.LeaseRequest) (api.Lease, error)
	Renew(ctx context.Context, id string, ttl time.Duration) (api.Lease, error)
	Release(ctx context.Context, id string) (api.Lease, error)
}

var _ Daemon = (*client.Client)(nil)

// Result is one device allocated to a claim (its status.allocation).
type Result struct {
	Request string `json:"request"`
	Driver  string `json:"driver"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// MemoryBytes is the consumed capacity "memory".
	MemoryBytes int64 `json:"memoryBytes"`
	// ShareID tells apart several allocations of one shared device.
	ShareID string `json:"shareID,omitempty"`
}

// Claim is a ResourceClaim as the start-up reconciliation sees it.
type Claim struct {
	UID, Namespace, Name string
	// Results is the allocation (nil: not allocated).
	Results []Result
	// Reserved: status.reservedFor names a consumer (a pod) still.
	Reserved bool
}

// Claims reads ResourceClaims.
type Claims interface {
	// Allocation reads the allocation of one claim.
	Allocation(ctx context.Context, namespace, name, uid string) ([]Result, error)
	// List reads every claim of the cluster (all namespaces).
	List(ctx context.Context) ([]Claim, error)
}

// Slices publishes this node's ResourceSlice.
type Slices interface {
	Publish(ctx context.Context, s Slice) error
}

// Options configures a Driver. Daemon, Claims, Slices and Node are required.
type Options struct {
	Daemon Daemon
	Claims Claims
	Slices Slices
	Log    *slog.Logger
	// Node is this node's name (the slice's pool and nodeName).
	Node string
	// Step is the granularity of published capacity and of requests
	// (default 256 MiB).
	Step int64
	// Interval is how often GPUs are re-read, the slice republished when it
	// changed, and the driver's leases renewed (default 5 s).
	Interval time.Duration
	// LeaseTTL is the TTL of the leases, renewed every Interval (default 10 min).
	LeaseTTL time.Duration
	// PluginDir holds the driver's kubelet socket and its checkpoint (default
	// /var/lib/kubelet/plugins/gpu.wsched.io).
	PluginDir string
	// RegistryDir is the kubelet's plugin registry (default
	// /var/lib/kubelet/plugins_registry).
	RegistryDir string
	// CDIDir is where CDI specs are written (default /var/run/cdi).
	CDIDir string
}

// Driver is one DRA driver; Run serves it. Run's goroutine owns the
// record of prepared claims: the kubelet's calls reach it through ops.
type Driver struct {
	opts Options
	log  *slog.Logger
	d    Daemon
	ops  chan op
	// claims are the prepared claims by UID (the checkpoint's content);
	// only Run's goroutine touches them.
	claims map[string]preparedClaim
}

// op is one call of the kubelet, run on Run's goroutine.
type op struct {
	ctx  context.Context
	f    func(context.Context)
	done chan struct{}
}

// New checks opts and fills in defaults.
func New(opts Options) (*Driver, error) {
	if opts.Daemon == nil || opts.Claims == nil || opts.Slices == nil || opts.Node == "" {
		return nil, fmt.Errorf("dra driver: %w: need a daemon, claims, slices and a node name", ErrBadRequest)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Step <= 0 {
		opts.Step = 256 << 20
	}
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 10 * time.Minute
	}
	if opts.PluginDir == "" {
		opts.PluginDir = filepath.Join("/var/lib/kubelet/plugins", DriverName)
	}
	if opts.RegistryDir == "" {
		opts.RegistryDir = "/var/lib/kubelet/plugins_registry"
	}
	if opts.CDIDir == "" {
		opts.CDIDir = "/var/run/cdi"
	}
	return &Driver{opts: opts, log: opts.Log, d: opts.Daemon, ops: make(chan op)}, nil
}
