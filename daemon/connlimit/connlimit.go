// Package connlimit bounds the connections a listener keeps open: in total,
// and per uid on a Unix socket (the kernel's SO_PEERCRED, read at accept).
// A connection over a bound is answered with a short HTTP error and closed
// at once, so one local user cannot hold every file descriptor the daemon
// has. Each listener gets a Counter of its own (the Unix socket's budget is
// not the TCP listener's), unless the caller shares one on purpose.
package connlimit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Counter counts the open connections of one or more listeners: the total
// bound is shared by every listener that uses the same Counter.
type Counter struct {
	max, perUID       int
	maxKey, perUIDKey string // the settings named in refusals

	mu    sync.Mutex
	open  int
	byUID map[int]int

	refusing atomic.Int32 // refusals being written now
	refused  atomic.Uint64
}

// Limits configure a Counter: open connections in total (Max) and per
// non-root uid (PerUID), 0 meaning no bound; MaxKey and PerUIDKey name the
// settings in the answers to refused connections.
type Limits struct {
	Max, PerUID       int
	MaxKey, PerUIDKey string
}

// New returns a Counter with the given limits.
func New(l Limits) *Counter {
	if l.MaxKey == "" {
		l.MaxKey = "[daemon] max_connections"
	}
	if l.PerUIDKey == "" {
		l.PerUIDKey = "[daemon] max_connections_per_uid"
	}
	return &Counter{max: l.Max, perUID: l.PerUID, maxKey: l.MaxKey, perUIDKey: l.PerUIDKey, byUID: map[int]int{}}
}

// NewCounter bounds open connections to max in total and perUID per
// non-root uid; 0 means no bound. Refusals name the Unix socket's settings.
func NewCounter(max, perUID int) *Counter { return New(Limits{Max: max, PerUID: perUID}) }

// Open reports the connections open now, in total and for uid.
func (c *Counter) Open(uid int) (total, ofUID int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.byUID[uid]
}

// Refused is how many connections were refused so far.
func (c *Counter) Refused() uint64 { return c.refused.Load() }

// admit counts a new connection of uid (-1: unknown), or says which bound
// it would pass.
func (c *Counter) admit(uid int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.max > 0 && c.open >= c.max {
		return &refusal{status: 503, code: "too_many_connections",
			msg: fmt.Sprintf("this listener holds %d connections, %s; retry later", c.open, c.maxKey)}
	}
	if uid > 0 && c.perUID > 0 && c.byUID[uid] >= c.perUID {
		return &refusal{status: 429, code: "limit_exceeded",
			msg: fmt.Sprintf("uid %d holds %d connections, %s; close idle ones", uid, c.byUID[uid], c.perUIDKey)}
	}
	c.open++
	if uid > 0 {
		c.byUID[uid]++
	}
	return nil
}

func (c *Counter) release(uid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open--
	if uid > 0 {
		if c.byUID[uid]--; c.byUID[uid] <= 0 {
			delete(c.byUID, uid)
		}
	}
}

// Listen wraps ln: Accept returns only connections within c's bounds.
func (c *Counter) Listen(ln net.Listener) net.Listener { return &listener{Listener: ln, c: c} }

type listener struct {
	net.Listener
	c *Counter
}

// Accept returns the next connection within the bounds; the others are
// answered and closed in the background.
func (l *listener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid := PeerUID(conn)
		if err := l.c.admit(uid); err != nil {
			l.c.refuse(conn, err)
			continue
		}
		return &counted{Conn: conn, release: sync.OnceFunc(func() { l.c.release(uid) })}, nil
	}
}

// PeerUID is the uid of a Unix-socket peer, or -1 (TCP, or unknown).
func PeerUID(conn net.Conn) int {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return -1
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1
	}
	uid := -1
	_ = raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			uid = int(cred.Uid)
		}
	})
	return uid
}

// maxRefusing bounds the refusals written at once; past it a connection is
// closed without an answer.
const maxRefusing = 64

type refusal struct {
	status    int
	code, msg string
}

func (r *refusal) Error() string { return r.msg }

// refuse answers conn with err's HTTP status and closes it, within a second.
func (c *Counter) refuse(conn net.Conn, err error) {
	c.refused.Add(1)
	var r *refusal
	if !errors.As(err, &r) || c.refusing.Add(1) > maxRefusing {
		if r != nil {
			c.refusing.Add(-1)
		}
		conn.Close()
		return
	}
	go func() {
		defer c.refusing.Add(-1)
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		body := fmt.Sprintf(`{"error":{"code":%q,"message":%q}}`+"\n", r.code, r.msg)
		fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: %d\r\n\r\n%s",
			r.status, statusText(r.status), len(body), body)
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(conn, 64<<10)) // let the client finish sending: no reset
	}()
}

func statusText(code int) string {
	if code == 429 {
		return "Too Many Requests"
	}
	return "Service Unavailable"
}

// counted is an admitted connection; closing it frees its place.
type counted struct {
	net.Conn
	release func()
}

func (c *counted) Close() error {
	c.release()
	return c.Conn.Close()
}

// NetConn is the connection itself (for SO_PEERCRED and the like).
func (c *counted) NetConn() net.Conn { return c.Conn }
