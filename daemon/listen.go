package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
)

// listen returns the socket to serve: an injected listener, the one systemd
// passed (socket activation), or a new one at [daemon] socket.
func (d *Daemon) listen() (net.Listener, error) {
	if d.listener != nil {
		d.socket = d.listener.Addr().String()
		return d.listener, nil
	}
	named, err := activation.ListenersWithNames()
	if err != nil {
		return nil, fmt.Errorf("socket activation: %w", err)
	}
	var got []net.Listener
	for _, ls := range named {
		for _, l := range ls {
			if l != nil {
				got = append(got, l)
			}
		}
	}
	switch len(got) {
	case 0:
	case 1:
		d.activated, d.socket = true, got[0].Addr().String()
		d.log.Info("serving on the socket systemd passed", "socket", d.socket)
		return got[0], nil
	default:
		return nil, fmt.Errorf("socket activation: systemd passed %d sockets; wsched serves exactly one", len(got))
	}
	ln, err := createSocket(d.cfg.Daemon.Socket, d.cfg.Daemon.SocketMode.Perm(), d.cfg.Daemon.SocketGroup)
	if err != nil {
		return nil, err
	}
	d.socket = d.cfg.Daemon.Socket
	d.log.Info("serving", "socket", d.socket)
	return ln, nil
}

// createSocket makes the Unix socket at path with the given mode and group.
// A stale socket file is replaced; a live one means another daemon runs.
func createSocket(path string, mode os.FileMode, group string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("another wsched daemon is serving %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	if err := chgrp(path, group); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// chgrp gives the socket to group when that group exists.
func chgrp(path, group string) error {
	if group == "" {
		return nil
	}
	g, err := user.LookupGroup(group)
	var unknown user.UnknownGroupError
	if errors.As(err, &unknown) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up group %s: %w", group, err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	if err := os.Chown(path, -1, gid); err != nil {
		return fmt.Errorf("give socket to group %s: %w", group, err)
	}
	return nil
}

// listenTCP opens [daemon] http_listen, when configured.
func (d *Daemon) listenTCP() (net.Listener, error) {
	if d.cfg.Daemon.HTTPListen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", d.cfg.Daemon.HTTPListen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", d.cfg.Daemon.HTTPListen, err)
	}
	d.tcpAddr = ln.Addr().String()
	d.log.Info("serving over TCP (bearer token required)", "addr", d.tcpAddr)
	return ln, nil
}
