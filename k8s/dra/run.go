package dra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Run serves the driver until ctx ends: the DRA service on
// PluginDir/dra.sock, the registration service on
// RegistryDir/<driver>-reg.sock (the kubelet's plugin watcher finds it and
// connects), and every Interval: the GPUs re-read, the slice republished
// when it changed, the driver's leases renewed. First it loads its record
// of prepared claims and reconciles it, the daemon's leases and the CDI
// specs with the claims of the API server (reconcile.go; retried every
// Interval until the API server answers). Run's goroutine runs the kubelet's
// calls one at a time.
func (d *Driver) Run(ctx context.Context) error {
	claims, err := loadCheckpoint(d.checkpointPath())
	if err != nil {
		// Not fatal: the leases' labels and the API server still say
		// which claims are live.
		d.log.Warn("prepared claims: checkpoint ignored", "err", err)
		if rerr := os.Rename(d.checkpointPath(), d.checkpointPath()+".bad"); rerr != nil {
			return fmt.Errorf("dra driver: set bad checkpoint aside: %w", rerr)
		}
		claims = map[string]preparedClaim{}
	}
	d.claims = claims
	draSock := filepath.Join(d.opts.PluginDir, "dra.sock")
	regSock := filepath.Join(d.opts.RegistryDir, DriverName+"-reg.sock")
	dra, err := listen(draSock)
	if err != nil {
		return err
	}
	reg, err := listen(regSock)
	if err != nil {
		dra.Close()
		return err
	}
	srv := grpc.NewServer()
	drapb.RegisterDRAPluginServer(srv, draServer{d: d})
	rsrv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(rsrv, regServer{d: d, endpoint: draSock})
	go func() { _ = srv.Serve(dra) }()
	go func() { _ = rsrv.Serve(reg) }()
	defer srv.Stop()
	defer rsrv.Stop()
	d.log.Info("serving DRA driver", "driver", DriverName, "socket", draSock, "registration", regSock)
	d.loop(ctx)
	return nil
}

// loop is Run's owner loop: the kubelet's calls, and the periodic work.
func (d *Driver) loop(ctx context.Context) {
	var last []Device
	reconciled := false
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case o := <-d.ops:
			o.f(o.ctx)
			close(o.done)
			continue
		case <-t.C:
		}
		if !reconciled {
			if err := d.reconcile(ctx); err != nil {
				d.log.Warn("start-up reconciliation failed; trying again", "err", err)
			} else {
				reconciled = true
			}
		}
		if devs, err := d.publish(ctx, last); err != nil {
			d.log.Warn("publish failed", "err", err)
		} else {
			last = devs
		}
		d.renew(ctx)
		t.Reset(d.opts.Interval)
	}
}

// call runs f on Run's goroutine and waits for it; f gets ctx, the
// caller's.
func (d *Driver) call(ctx context.Context, f func(context.Context)) error {
	o := op{ctx: ctx, f: f, done: make(chan struct{})}
	select {
	case d.ops <- o:
	case <-ctx.Done():
		return fmt.Errorf("dra driver: %w", ctx.Err())
	}
	<-o.done // f runs with ctx: it ends soon once ctx does
	return nil
}

func (d *Driver) checkpointPath() string { return filepath.Join(d.opts.PluginDir, CheckpointFile) }

func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return ln, nil
}

// publish re-reads the GPUs and publishes the slice when the devices
// differ from last.
func (d *Driver) publish(ctx context.Context, last []Device) ([]Device, error) {
	gpus, err := d.d.GPUs(ctx)
	if err != nil {
		return nil, fmt.Errorf("read GPUs: %w", err)
	}
	devs := devices(gpus, d.opts.Step)
	if last != nil && sameDevices(devs, last) {
		return last, nil
	}
	if err := d.opts.Slices.Publish(ctx, Slice{Node: d.opts.Node, Step: d.opts.Step, Devices: devs}); err != nil {
		return nil, err
	}
	d.log.Info("published", "driver", DriverName, "devices", len(devs))
	return devs, nil
}

// renew renews the driver's leases.
func (d *Driver) renew(ctx context.Context) {
	leases, err := d.d.Leases(ctx)
	if err != nil {
		d.log.Warn("renew: list leases", "err", err)
		return
	}
	for _, l := range leases {
		if !ownLease(l) || l.State != "granted" {
			continue
		}
		if _, err := d.d.Renew(ctx, l.ID, d.opts.LeaseTTL); err != nil {
			d.log.Warn("renew failed", "lease", l.ID, "err", err)
		}
	}
}

// regServer answers the kubelet's plugin watcher.
type regServer struct {
	registerapi.UnimplementedRegistrationServer
	d        *Driver
	endpoint string
}

func (s regServer) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type: registerapi.DRAPlugin, Name: DriverName, Endpoint: s.endpoint,
		SupportedVersions: []string{drapb.DRAPluginService},
	}, nil
}

func (s regServer) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if st.GetPluginRegistered() {
		s.d.log.Info("registered with the kubelet", "driver", DriverName)
	} else {
		s.d.log.Warn("the kubelet refused the registration", "err", st.GetError())
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
