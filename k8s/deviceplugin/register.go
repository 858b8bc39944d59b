package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Run serves the plugin until ctx ends: it waits for the daemon, serves the
// device-plugin API on PluginDir/Endpoint and registers with the kubelet,
// and does both again when the kubelet restarts (which removes the plugin
// sockets and recreates kubelet.sock).
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
	names := make(chan string, 16)
	wg.Go(func() { w.read(ctx, names) })
	for {
		srv, info, err := p.serve()
		if err != nil {
			return err
		}
		p.registerLogged(ctx)
		restart := false
		for !restart {
			select {
			case <-ctx.Done():
				srv.Stop()
				return nil
			case name, ok := <-names:
				if !ok {
					srv.Stop()
					return fmt.Errorf("watch %s: stopped", p.opts.PluginDir)
				}
				if st, err := os.Stat(p.socket()); err != nil || !os.SameFile(st, info) {
					p.log.Info("plugin socket removed: serving again", "socket", p.socket())
					restart = true
				} else if name == "kubelet.sock" && exists(p.kubeletSocket()) {
					p.log.Info("kubelet socket recreated: registering again")
					p.registerLogged(ctx)
				}
			}
		}
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
		Options:      &pluginapi.DevicePluginOptions{},
	})
	if err != nil {
		return fmt.Errorf("register with kubelet %s: %w", p.kubeletSocket(), err)
	}
	return nil
}

func (p *Plugin) registerLogged(ctx context.Context) {
	if !exists(p.kubeletSocket()) {
		p.log.Info("waiting for the kubelet", "socket", p.kubeletSocket())
		return
	}
	if err := p.register(ctx); err != nil {
		p.log.Warn("registration failed; waiting for the kubelet to restart", "err", err)
		return
	}
	p.log.Info("registered with the kubelet", "resource", ResourceName)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
