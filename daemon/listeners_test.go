package daemon

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
)

// tcpFlood opens n TCP connections that send half a request and wait (no
// token ever arrives), and returns how many the daemon answered at once
// with 503 (beyond its TCP budget), read from all together within 500 ms
// (well inside tcp_header_timeout, which would free places); the others
// stay open until the test closes them.
func tcpFlood(t *testing.T, addr string, n int) (refused int) {
	t.Helper()
	var conns []net.Conn
	for range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: wsched\r\n")
		conns = append(conns, conn)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(500 * time.Millisecond)
	for _, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = conn.SetReadDeadline(deadline)
			if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusServiceUnavailable {
					mu.Lock()
					refused++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return refused
}

// unixRequests sends n requests as root over the Unix socket, each on a
// connection of its own kept open until all are sent, and counts the
// refused ones (any answer but 200).
func unixRequests(t *testing.T, socket string, n int) (refused int) {
	t.Helper()
	for range n {
		conn, err := net.Dial("unix", socket)
		if err != nil {
			refused++
			continue
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: wsched\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			refused++
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			refused++
		}
	}
	return refused
}

// tcpBudget: the TCP listener's own cap is small, the Unix socket's a
// little larger; both are passed by the flood alone if they are shared.
func tcpBudget(c *config.Config) {
	c.Daemon.HTTPListen, c.Daemon.HTTPToken = "127.0.0.1:0", testToken
	c.Daemon.MaxConnections, c.Daemon.TCPMaxConnections = 128, 64
}

// TestTCPFloodLeavesUnixSocket: connections without a token fill the TCP
// listener's budget (503 beyond it, naming tcp_max_connections) and take
// nothing from the Unix socket's: every local request is answered (issue
// 25 item 7: 104 of 108 were refused with one shared cap).
func TestTCPFloodLeavesUnixSocket(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, tcpBudget)
	if refused := tcpFlood(t, td.d.tcpAddr, 100); refused != 100-64 {
		t.Errorf("100 TCP connections against tcp_max_connections 64: %d refused, want 36", refused)
	}
	if refused := unixRequests(t, td.socket, 108); refused != 0 {
		t.Errorf("%d of 108 Unix-socket requests refused while TCP is flooded", refused)
	}
	conn, err := net.Dial("tcp", td.d.tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	status, body := rawRequest(t, conn, "GET", "/healthz", "")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "[daemon] tcp_max_connections") {
		t.Errorf("TCP beyond its budget: %d %s, want 503 naming [daemon] tcp_max_connections", status, body)
	}
}

// TestTCPHeaderTimeoutIsShorter: a TCP connection that never finishes its
// headers (never shows a token) is closed after tcp_header_timeout, while a
// Unix-socket one keeps header_timeout.
func TestTCPHeaderTimeoutIsShorter(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, func(c *config.Config) {
		c.Daemon.HTTPListen, c.Daemon.HTTPToken = "127.0.0.1:0", testToken
		c.Daemon.HeaderTimeout = units.Duration(time.Minute)
		c.Daemon.TCPHeaderTimeout = units.Duration(200 * time.Millisecond)
	})
	tcp, err := net.Dial("tcp", td.d.tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	unix, err := net.Dial("unix", td.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close()
	for _, c := range []net.Conn{tcp, unix} {
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: wsched\r\n")
	}
	if !closedByServer(t, tcp) {
		t.Error("a TCP connection without complete headers stayed open past tcp_header_timeout")
	}
	// The TCP one is closed: the Unix one, under header_timeout (1 m), is not.
	_ = unix.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := unix.Read(make([]byte, 1)); !isTimeout(err) {
		t.Errorf("the Unix-socket connection was closed (%v): header_timeout is 1 m", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestTokenStreamsLimited: the TCP token's bearer is limited like one uid:
// [limits] token_subscribers streams, then 429.
func TestTokenStreamsLimited(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, func(c *config.Config) {
		c.Daemon.HTTPListen, c.Daemon.HTTPToken = "127.0.0.1:0", testToken
		c.Limits.TokenSubscribers = 2
	})
	var got []int
	for range 3 {
		conn, err := net.Dial("tcp", td.d.tcpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(conn, "GET /v1/monitor/events HTTP/1.1\r\nHost: wsched\r\nAuthorization: Bearer %s\r\n\r\n", testToken)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.StatusCode)
	}
	if fmt.Sprint(got) != "[200 200 429]" {
		t.Errorf("3 monitor streams over TCP with token_subscribers 2: %v, want [200 200 429]", got)
	}
}
