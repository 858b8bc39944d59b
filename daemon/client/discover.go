package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
)

// SystemSocket is where the packaged daemon listens (wsched.socket); a user
// who configured no socket finds it after their own.
const SystemSocket = "/run/wsched/wsched.sock"

// Discover returns a client that, on its first connection, tries the sockets
// in order and keeps the first that accepts. It is for a user who configured
// no socket: their per-user daemon first, then the system one. group is the
// group that may use the system socket; the error of a failed discovery
// names it with every path tried.
func Discover(group string, sockets ...string) *Client {
	if group == "" {
		group = "wsched"
	}
	c := New(sockets[0])
	c.discovery = &discovery{candidates: sockets, group: group}
	return c
}

// discovery remembers the socket that answered, so that later connections
// (and the messages that name the socket) use it.
type discovery struct {
	candidates []string
	group      string
	mu         sync.Mutex
	found      string
}

// attempt is one socket tried and why it did not do.
type attempt struct {
	socket string
	err    error
}

// discoveryError says every socket tried; it unwraps to each attempt's error.
type discoveryError struct {
	attempts []attempt
	group    string
}

func (e *discoveryError) Error() string {
	parts := make([]string, len(e.attempts))
	for i, a := range e.attempts {
		parts[i] = fmt.Sprintf("%s (%s)", a.socket, reason(a.err))
	}
	return "tried " + strings.Join(parts, ", ")
}

func (e *discoveryError) Unwrap() []error {
	out := make([]error, len(e.attempts))
	for i, a := range e.attempts {
		out[i] = a.err
	}
	return out
}

// reason is the short form of a dial error: "no such file or directory",
// "permission denied", "connection refused".
func reason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// Socket is the socket the client dials: the one discovery found, else the
// first candidate.
func (c *Client) Socket() string {
	if c.discovery != nil {
		c.discovery.mu.Lock()
		defer c.discovery.mu.Unlock()
		if c.discovery.found != "" {
			return c.discovery.found
		}
	}
	return c.socket
}

// dial connects to the daemon: the configured socket, or with discovery the
// first candidate that accepts.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: DialTimeout}
	if c.discovery == nil {
		return d.DialContext(ctx, "unix", c.socket)
	}
	c.discovery.mu.Lock()
	found := c.discovery.found
	c.discovery.mu.Unlock()
	if found != "" {
		return d.DialContext(ctx, "unix", found)
	}
	var tried []attempt
	for _, s := range c.discovery.candidates {
		conn, err := d.DialContext(ctx, "unix", s)
		if err == nil {
			c.discovery.mu.Lock()
			c.discovery.found = s
			c.discovery.mu.Unlock()
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		tried = append(tried, attempt{socket: s, err: err})
	}
	return nil, &net.OpError{Op: "dial", Net: "unix", Err: &discoveryError{attempts: tried, group: c.discovery.group}}
}

// unreachableAll is the error of a discovery that found no daemon: every
// path with its reason, and how to get access to the system socket.
func (c *Client) unreachableAll(de *discoveryError) error {
	advice := fmt.Sprintf("start your own with `wsched serve`, or use the system daemon: `systemctl start wsched` and join group %s (`sudo usermod -aG %s $USER`, then log in again)", de.group, de.group)
	if errors.Is(de, syscall.EACCES) {
		advice = fmt.Sprintf("permission denied: join group %s (`sudo usermod -aG %s $USER`, then log in again) or ask its administrator", de.group, de.group)
	}
	return fmt.Errorf("%w: %w: %s", ErrUnreachable, de, advice)
}
