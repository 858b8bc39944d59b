package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
)

// closedByServer reports whether the server closes conn (EOF) before the
// client gives up waiting (10 s: far longer than the timeouts under test).
func closedByServer(t *testing.T, conn net.Conn) bool {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, conn)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

func shortTimeouts(c *config.Config) {
	c.Daemon.IdleTimeout = units.Duration(200 * time.Millisecond)
	c.Daemon.HeaderTimeout = units.Duration(200 * time.Millisecond)
	c.Daemon.BodyTimeout = units.Duration(200 * time.Millisecond)
}

func TestIdleKeepAliveIsClosed(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, shortTimeouts)
	conn, err := net.Dial("unix", td.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if status, _ := rawRequest(t, conn, "GET", "/healthz", ""); status != http.StatusOK {
		t.Fatalf("healthz: %d", status)
	}
	if !closedByServer(t, conn) {
		t.Error("an idle keep-alive connection stayed open past [daemon] idle_timeout")
	}
}

func TestSlowHeaderAndBodyAreClosed(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, shortTimeouts)
	for name, partial := range map[string]string{
		"header": "GET /healthz HTTP/1.1\r\nHost: wsched\r\n",
		"body":   "POST /v1/leases HTTP/1.1\r\nHost: wsched\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"memory",
	} {
		conn, err := net.Dial("unix", td.socket)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(conn, partial)
		if !closedByServer(t, conn) {
			t.Errorf("a request with a stalled %s kept its connection open", name)
		}
		conn.Close()
	}
}

func TestLongPollOutlivesBodyTimeout(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, shortTimeouts)
	conn, err := net.Dial("unix", td.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A request that waits 1 s in the queue (5× body_timeout) and is then
	// refused for lack of memory: the wait must not be cut by the deadline.
	status, body := rawRequest(t, conn, "POST", "/v1/leases", `{"memory_bytes": 68719476736, "wait_seconds": 1}`)
	if status != http.StatusGatewayTimeout && status != http.StatusConflict {
		t.Fatalf("long poll: %d %s", status, body)
	}
}

func TestTCPClosesAfter401(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, func(c *config.Config) {
		c.Daemon.HTTPListen, c.Daemon.HTTPToken = "127.0.0.1:0", testToken
	})
	conn, err := net.Dial("tcp", td.d.tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: wsched\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", resp.StatusCode)
	}
	if !closedByServer(t, conn) {
		t.Error("the TCP connection stayed open after a 401")
	}
}
