package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Run serves the plugin until ctx ends: it waits for the daemon, serves the
// device-plugin API on PluginDir/Endpoint and registers with the kubelet,
// and does both again when the kubelet restarts. A restarting kubelet
// removes the plugin sockets and its own kubelet.sock, then creates a new
// kubelet.sock; the watch reports that as several events, possibly late and
// repeated. The plugin registers once per kubelet.sock it has not
// registered with (and once after serving again): the kubelet refuses a
// second registration of a connected plugin, and its bookkeeping of the
// live connection suffers.
func (p *Plugin) Run(ctx context.Context) error {
	if err := p.waitDaemon(ctx); err != nil {
		return err
	}
	w, err := watchDir(p.opts.PluginDir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after the watch is closed and ctx cancelled (LIFO)
	defer w.Close()
	defer cancel()
	wg.Go(func() { p.loop(ctx) })
	events := make(chan dirEvent, 16)
	wg.Go(func() { w.read(ctx, events) })
	for {
		srv, info, err := p.serve()
		if err != nil {
			return err
		}
		var reg registration // a new endpoint: register with whichever kubelet is there
		retry := p.registerOnce(ctx, &reg)
		restart := false
		for !restart {
			select {
			case <-ctx.Done():
				srv.Stop()
				return nil
			case <-retry.C():
				retry = p.registerOnce(ctx, &reg)
			case ev, ok := <-events:
				if !ok {
					srv.Stop()
					return fmt.Errorf("watch %s: stopped", p.opts.PluginDir)
				}
				if st, err := os.Stat(p.socket()); err != nil || !os.SameFile(st, info) {
					p.log.Info("plugin socket removed: serving again", "socket", p.socket())
					restart = true
				} else if ev.name == "kubelet.sock" && ev.created {
					retry.Stop()
					retry = p.registerOnce(ctx, &reg)
				}
			}
		}
		retry.Stop()
		srv.Stop()
	}
}

// waitDaemon reads the GPUs until the daemon answers.
func (p *Plugin) waitDaemon(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the wsched daemon: %w", ctx.Err())
		case <-t.C:
		}
		err := p.refresh(ctx)
		if err == nil {
			return nil
		}
		p.log.Warn("waiting for the wsched daemon", "err", err)
		t.Reset(p.opts.Interval)
	}
}

// serve listens on the plugin socket (replacing a stale one) and serves the
// device-plugin API on it; info identifies the socket file.
func (p *Plugin) serve() (*grpc.Server, os.FileInfo, error) {
	path := p.socket()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("remove stale plugin socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on plugin socket: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("stat plugin socket: %w", err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, deviceServer{p: p})
	go func() {
		if err := srv.Serve(ln); err != nil {
			p.log.Warn("plugin server stopped", "err", err)
		}
	}()
	p.log.Info("serving device plugin", "socket", path)
	return srv, info, nil
}

// register announces the plugin to the kubelet.
func (p *Plugin) register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+p.kubeletSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial kubelet %s: %w", p.kubeletSocket(), err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     Endpoint,
		ResourceName: ResourceName,
		Options:      pluginOptions(),
	})
	if err != nil {
		return fmt.Errorf("register with kubelet %s: %w", p.kubeletSocket(), err)
	}
	return nil
}

// registration remembers the kubelet.sock the plugin registered with.
type registration struct{ sock sockID }

// registerOnce registers with the kubelet unless reg says the plugin
// already did with the kubelet.sock there now (a repeated or late event).
// When a kubelet.sock is there but refuses the registration (a kubelet
// between creating its socket and listening on it refuses connections), the
// returned timer asks for another try after Interval.
func (p *Plugin) registerOnce(ctx context.Context, reg *registration) *retryTimer {
	id, ok := statSocket(p.kubeletSocket())
	if !ok {
		p.log.Info("waiting for the kubelet", "socket", p.kubeletSocket())
		return nil
	}
	if id == reg.sock {
		p.log.Debug("already registered with this kubelet", "socket", p.kubeletSocket())
		return nil
	}
	err := p.register(ctx)
	// The socket may have been replaced while dialling (a restarting
	// kubelet removes the old one just before it listens on the new): the
	// one there now is the live kubelet's.
	if now, ok := statSocket(p.kubeletSocket()); ok {
		id = now
	}
	switch {
	case err != nil && strings.Contains(err.Error(), "already connected"):
		// The kubelet holds a live connection to this endpoint: registered.
		p.log.Info("the kubelet already has this plugin connected", "socket", p.kubeletSocket())
	case err != nil:
		p.log.Warn("registration failed; trying again", "err", err, "after", p.opts.Interval)
		return &retryTimer{time.NewTimer(p.opts.Interval)}
	default:
		p.log.Info("registered with the kubelet", "resource", ResourceName)
	}
	reg.sock = id
	return nil
}

// retryTimer is a timer that may be nil (no retry due).
type retryTimer struct{ t *time.Timer }

// C is the timer's channel; nil (never ready) without a timer.
func (r *retryTimer) C() <-chan time.Time {
	if r == nil {
		return nil
	}
	return r.t.C
}

// Stop stops the timer, if any.
func (r *retryTimer) Stop() {
	if r != nil {
		r.t.Stop()
	}
}

// sockID tells one kubelet.sock from another: a new kubelet's socket may
// reuse the inode number of the old one, never its change time too (the
// kubelet takes far longer than a clock tick to restart).
type sockID struct {
	dev, ino uint64
	ctime    unix.Timespec
}

func statSocket(path string) (sockID, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return sockID{}, false
	}
	return sockID{dev: st.Dev, ino: st.Ino, ctime: st.Ctim}, true
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
