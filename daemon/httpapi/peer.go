package httpapi

import (
	"context"
	"net"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wsched/wsched/daemon/fdpass"
)

// Peer is the process at the other end of a Unix-socket connection, as the
// kernel reports it (SO_PEERCRED): it cannot be forged by the client.
type Peer struct {
	PID, UID, GID int
	// Groups are the peer's supplementary groups when it connected
	// (SO_PEERGROUPS); nil when the kernel could not say.
	Groups []int
	// Known is false for connections without credentials (TCP).
	Known bool
}

// IsRoot reports whether the peer runs as root.
func (p Peer) IsRoot() bool { return p.Known && p.UID == 0 }

type peerKey struct{}

// PeerContext stores the connection's peer credentials in its context
// (http.Server.ConnContext).
func PeerContext(ctx context.Context, c net.Conn) context.Context {
	if r := fdpass.FromConn(c); r != nil {
		ctx = context.WithValue(ctx, filesKey{}, r)
	}
	for { // under the wrappers of connlimit and fdpass
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
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
	var groups []int
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		groups = peerGroups(int(fd))
	}); err != nil || credErr != nil {
		return context.WithValue(ctx, peerKey{}, Peer{})
	}
	return context.WithValue(ctx, peerKey{}, Peer{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid), Groups: groups, Known: true})
}

type filesKey struct{}

// passedFiles takes the descriptors the request's connection received
// (SCM_RIGHTS); the caller closes them.
func passedFiles(ctx context.Context) []*os.File {
	if r, ok := ctx.Value(filesKey{}).(fdpass.Receiver); ok {
		return r.TakeFiles()
	}
	return nil
}

// peerFrom returns the peer stored by PeerContext.
func peerFrom(ctx context.Context) Peer {
	p, _ := ctx.Value(peerKey{}).(Peer)
	return p
}

// peerGroups reads SO_PEERGROUPS (Linux 4.13+): the supplementary groups of
// the peer when it connected, which a later PID reuse cannot change.
func peerGroups(fd int) []int {
	buf := make([]uint32, 64)
	for {
		n := uint32(len(buf) * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch {
		case errno == unix.ERANGE && len(buf) < 1<<16:
			buf = make([]uint32, int(n)/4+1)
			continue
		case errno != 0:
			return nil
		}
		out := make([]int, 0, n/4)
		for _, g := range buf[:n/4] {
			out = append(out, int(g))
		}
		return out
	}
}
