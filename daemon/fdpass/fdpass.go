// Package fdpass passes open files over Unix-socket connections
// (SCM_RIGHTS), as Docker and systemd do: a client sends a descriptor with
// the first bytes of a request it writes on a connection of its own, and
// the daemon keeps the descriptors each connection received for the
// handler of that request. A client thus shows the daemon exactly the file
// it opened itself, with its own permissions.
package fdpass

import (
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// MaxFiles bounds the descriptors one connection may hold unclaimed; more
// are closed on arrival.
const MaxFiles = 4

// Receiver is a connection that keeps the descriptors it received.
type Receiver interface {
	// TakeFiles returns the descriptors received so far and forgets them:
	// the caller closes them.
	TakeFiles() []*os.File
}

// Listen wraps ln: its Unix-socket connections read with recvmsg and keep
// the descriptors that arrive (Receiver); other connections pass through.
func Listen(ln net.Listener) net.Listener { return &listener{ln} }

type listener struct{ net.Listener }

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if uc := unixConn(c); uc != nil {
		return &conn{Conn: c, uc: uc}, nil
	}
	return c, nil
}

// unixConn finds the *net.UnixConn under wrappers with a NetConn method.
func unixConn(c net.Conn) *net.UnixConn {
	for {
		if uc, ok := c.(*net.UnixConn); ok {
			return uc
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = w.NetConn()
	}
}

// conn reads through uc.ReadMsgUnix; writes, deadlines and Close go to
// Conn (which may count the connection).
type conn struct {
	net.Conn
	uc *net.UnixConn

	oob []byte // Read's control-message buffer (reads are not concurrent)

	mu     sync.Mutex
	files  []*os.File
	closed bool
}

var oobSize = unix.CmsgSpace(MaxFiles * 4)

func (c *conn) Read(b []byte) (int, error) {
	if c.oob == nil {
		c.oob = make([]byte, oobSize)
	}
	oob := c.oob
	n, oobn, _, _, err := c.uc.ReadMsgUnix(b, oob)
	if oobn > 0 && oobn <= len(oob) {
		c.keep(parseRights(oob[:oobn]))
	}
	return max(n, 0), err // recvmsg's -1 on a deadline is no count for io.Reader
}

// keep stores received files, closing those past MaxFiles or after Close.
func (c *conn) keep(files []*os.File) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range files {
		if c.closed || len(c.files) >= MaxFiles {
			f.Close()
			continue
		}
		c.files = append(c.files, f)
	}
}

func (c *conn) TakeFiles() []*os.File {
	c.mu.Lock()
	defer c.mu.Unlock()
	files := c.files
	c.files = nil
	return files
}

// Close closes the files nobody took, then the connection.
func (c *conn) Close() error {
	c.mu.Lock()
	for _, f := range c.files {
		f.Close()
	}
	c.files, c.closed = nil, true
	c.mu.Unlock()
	return c.Conn.Close()
}

// NetConn is the wrapped connection (for SO_PEERCRED and the like).
func (c *conn) NetConn() net.Conn { return c.Conn }

// parseRights turns SCM_RIGHTS messages into files (the runtime receives
// them close-on-exec); anything else is ignored.
func parseRights(oob []byte) []*os.File {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), fmt.Sprintf("fd:%d", fd)))
		}
	}
	return files
}

// FromConn finds the Receiver in c or under its wrappers, or nil.
func FromConn(c net.Conn) Receiver {
	for {
		if r, ok := c.(Receiver); ok {
			return r
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = w.NetConn()
	}
}

// Sender sends f with the first bytes written on its connection; the
// connection carries one request.
type Sender struct {
	*net.UnixConn
	f    *os.File
	once sync.Once
}

// NewSender wraps a Unix connection so its first Write carries f.
func NewSender(uc *net.UnixConn, f *os.File) *Sender { return &Sender{UnixConn: uc, f: f} }

func (s *Sender) Write(b []byte) (int, error) {
	sent := false
	var n int
	var err error
	s.once.Do(func() {
		sent = true
		rights := unix.UnixRights(int(s.f.Fd()))
		var oobn int
		n, oobn, err = s.UnixConn.WriteMsgUnix(b, rights, nil)
		if err == nil && oobn != len(rights) {
			err = fmt.Errorf("send descriptor: %w", syscall.EMSGSIZE)
		}
	})
	if sent {
		if err == nil && n < len(b) {
			m, werr := s.UnixConn.Write(b[n:])
			return n + m, werr
		}
		return n, err
	}
	return s.UnixConn.Write(b)
}
