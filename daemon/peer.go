package daemon

import (
	"context"
	"net"

	"golang.org/x/sys/unix"
)

// Peer is the process at the other end of a Unix-socket connection, as the
// kernel reports it (SO_PEERCRED): it cannot be forged by the client.
type Peer struct {
	PID, UID, GID int
	// Known is false for connections without credentials (TCP).
	Known bool
}

// IsRoot reports whether the peer runs as root.
func (p Peer) IsRoot() bool { return p.Known && p.UID == 0 }

type peerKey struct{}

// peerContext stores the connection's peer credentials in its context
// (http.Server.ConnContext).
func peerContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return context.WithValue(ctx, peerKey{}, Peer{})
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return context.WithValue(ctx, peerKey{}, Peer{})
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return context.WithValue(ctx, peerKey{}, Peer{})
	}
	return context.WithValue(ctx, peerKey{}, Peer{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid), Known: true})
}

// peerFrom returns the peer stored by peerContext.
func peerFrom(ctx context.Context) Peer {
	p, _ := ctx.Value(peerKey{}).(Peer)
	return p
}
