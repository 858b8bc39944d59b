package connlimit

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/asuser"
	"github.com/wsched/wsched/internal/testtmp"
)

func TestMain(m *testing.M) {
	if asuser.Helper() == "dial" {
		os.Exit(dialHelper(os.Args[1], os.Args[2]))
	}
	os.Exit(testtmp.Main(m))
}

// dialHelper opens n connections to socket, all kept open, sends a request
// on each and prints how each was answered ("200:5 429:3").
func dialHelper(socket, count string) int {
	n, _ := strconv.Atoi(count)
	counts := map[string]int{}
	var conns []net.Conn
	for i := 0; i < n; i++ {
		c, err := net.Dial("unix", socket)
		if err != nil {
			counts["dial-error"]++
			continue
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(c, "GET /x HTTP/1.1\r\nHost: wsched\r\n\r\n")
		line, err := bufio.NewReader(c).ReadString('\n')
		if f := strings.Fields(line); err == nil && len(f) > 1 {
			counts[f[1]]++
		} else {
			counts["no-answer"]++
		}
	}
	fmt.Println(format(counts))
	return 0
}

func format(counts map[string]int) string {
	var out []string
	for k, v := range counts {
		out = append(out, fmt.Sprintf("%s:%d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// serve answers 200 on ln wrapped by c until the test ends.
func serve(t *testing.T, c *Counter, ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(c.Listen(ln)) }()
	t.Cleanup(func() { srv.Close() })
}

func TestPerUIDCapUsesKernelCredentials(t *testing.T) {
	dir := asuser.Dir(t)
	socket := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(socket, 0o666); err != nil {
		t.Fatal(err)
	}
	c := NewCounter(0, 5)
	serve(t, c, ln)

	out, err := asuser.Command(context.Background(), t, dir, "dial", socket, "8").CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "200:5 429:3" {
		t.Errorf("uid %d with 8 connections got %q, want 200:5 429:3", asuser.Nobody, got)
	}
	// Root (this process) is not limited per uid.
	var conns []net.Conn
	for i := 0; i < 8; i++ {
		conn, err := net.Dial("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conns = append(conns, conn)
	}
	for _, conn := range conns {
		if got := status(t, conn); got != "200" {
			t.Errorf("root connection answered %s, want 200", got)
		}
	}
}

func TestGlobalCapAnswers503AndFreesPlaces(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := NewCounter(3, 0)
	serve(t, c, ln)
	var conns []net.Conn
	got := map[string]int{}
	for i := 0; i < 5; i++ {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		got[status(t, conn)]++
	}
	if format(got) != "200:3 503:2" {
		t.Fatalf("5 connections against max 3: %v, want 200:3 503:2", format(got))
	}
	for _, conn := range conns {
		conn.Close()
	}
	// Closed connections free their places.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if total, _ := c.Open(-1); total == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("closed connections still counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if s := status(t, conn); s != "200" {
		t.Errorf("after closing: %s, want 200", s)
	}
}

func status(t *testing.T, conn net.Conn) string {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(conn, "GET /x HTTP/1.1\r\nHost: wsched\r\n\r\n")
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("read status: %v", err)
	}
	return strings.Fields(line)[1]
}

// TestCountersAreSeparate: two listeners with Counters of their own; filling
// one leaves the other's places, and a refusal names the full listener's
// setting.
func TestCountersAreSeparate(t *testing.T) {
	var addrs []string
	for _, c := range []*Counter{New(Limits{Max: 2, MaxKey: "[daemon] tcp_max_connections"}), NewCounter(2, 0)} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		serve(t, c, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	dial := func(addr string) net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	for range 2 {
		if s := status(t, dial(addrs[0])); s != "200" {
			t.Fatalf("first listener within its budget: %s", s)
		}
	}
	conn := dial(addrs[0])
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(conn, "GET /x HTTP/1.1\r\nHost: wsched\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 512)
	n, _ := resp.Body.Read(body)
	if resp.StatusCode != 503 || !strings.Contains(string(body[:n]), "[daemon] tcp_max_connections") {
		t.Errorf("beyond the first listener's budget: %d %s, want 503 naming tcp_max_connections", resp.StatusCode, body[:n])
	}
	for range 2 {
		if s := status(t, dial(addrs[1])); s != "200" {
			t.Errorf("second listener while the first is full: %s, want 200", s)
		}
	}
}
