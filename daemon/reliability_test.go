package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/asuser"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
)

// The reliability scenarios of issue 14 (`make reliability`): each runs
// against a daemon with the protection off ("before": the limit or timeout
// set to what the daemon had without it) and with the shipped defaults
// ("after"), over Unix sockets and loopback TCP only, and reports one
// figure for each. TestReliability prints the table; it runs only when
// WSCHED_RELIABILITY names the file to write it to.

// relRow is one line of the table.
type relRow struct {
	scenario, figure, before, after string
	pass                            bool
}

// unprotected turns off what issue 14 added that a setting can turn off.
func unprotected(c *config.Config) {
	c.Daemon.IdleTimeout = units.Duration(time.Hour)
	c.Daemon.BodyTimeout = units.Duration(time.Hour)
	c.Daemon.MaxConnections, c.Daemon.MaxConnectionsPerUID = 0, 0
	c.Limits = config.Limits{}
	c.Jobs.MinFreeDisk, c.Jobs.SpoolQuota = 0, 0
	c.Jobs.UploadTimeout = units.Duration(time.Hour)
}

// shipped keeps the defaults, with the idle timeout short enough to watch.
func shipped(c *config.Config) {
	c.Daemon.IdleTimeout = units.Duration(300 * time.Millisecond)
	c.Jobs.UploadTimeout = units.Duration(300 * time.Millisecond)
}

// holdHelper runs as nobody: it opens n connections to socket, sends a
// request on each, waits, and reports "answered refused open".
func holdHelper(args []string) int {
	socket := args[0]
	n, _ := strconv.Atoi(args[1])
	wait, _ := time.ParseDuration(args[2])
	var conns []net.Conn
	answered, refused := 0, 0
	for range n {
		c, err := net.Dial("unix", socket)
		if err != nil {
			refused++
			continue
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: wsched\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			refused++
			continue
		}
		resp.Body.Close()
		answered++
		conns = append(conns, c)
	}
	time.Sleep(wait)
	open := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
			open++
		}
	}
	fmt.Println(answered, refused, open)
	return 0
}

func holdAsNobody(t *testing.T, dir, socket string, n int, wait time.Duration) (answered, refused, open int) {
	t.Helper()
	out, err := asuser.Command(context.Background(), t, dir, "hold", socket, strconv.Itoa(n), wait.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("hold helper: %v: %s", err, out)
	}
	if _, err := fmt.Sscan(string(out), &answered, &refused, &open); err != nil {
		t.Fatalf("hold helper said %q", out)
	}
	return answered, refused, open
}

// relIdle: connections one uid keeps open, idle, 1 s after its requests.
func relIdle(t *testing.T, mod func(*config.Config)) (string, bool) {
	td, dir := asNobody(t, mod)
	answered, refused, open := holdAsNobody(t, dir, td.socket, 200, time.Second)
	ok := td.c.Health(context.Background()) == nil
	return fmt.Sprintf("%d of 200 held open (%d answered, %d refused)", open, answered, refused), ok
}

// streamsHelper runs as nobody: it opens n /v1/events streams, prints how
// many were accepted and refused, and then holds them without reading
// until its stdin closes.
func streamsHelper(args []string) int {
	socket := args[0]
	n, _ := strconv.Atoi(args[1])
	accepted, refused := 0, 0
	for range n {
		c, err := net.Dial("unix", socket)
		if err != nil {
			refused++
			continue
		}
		defer c.Close()
		fmt.Fprint(c, "GET /v1/events HTTP/1.1\r\nHost: wsched\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			refused++
			continue
		}
		accepted++
	}
	fmt.Println(accepted, refused)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// relEvents: grant+release pairs per second while one uid holds up to 300
// /v1/events streams it does not read, against none.
func relEvents(t *testing.T, mod func(*config.Config)) (string, bool) {
	td, dir := asNobody(t, func(c *config.Config) {
		mod(c)
		c.Daemon.IdleTimeout = units.Duration(time.Minute)
	})
	base := grantRate(t, td, 500*time.Millisecond)
	cmd := asuser.Command(context.Background(), t, dir, "streams", td.socket, "300")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	var accepted, refused int
	if _, err := fmt.Fscan(stdout, &accepted, &refused); err != nil {
		t.Fatalf("streams helper: %v", err)
	}
	loaded := grantRate(t, td, 500*time.Millisecond)
	return fmt.Sprintf("%d streams: %.0f/s (%.0f/s without)", accepted, loaded, base), loaded > 0
}

func grantRate(t *testing.T, td *testDaemon, d time.Duration) float64 {
	ctx := context.Background()
	n, start := 0, time.Now()
	for time.Since(start) < d {
		l, err := td.c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := td.c.Release(ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds()
}

// relLeases: leases one uid holds after asking for 300 one at a time.
func relLeases(t *testing.T, mod func(*config.Config)) (string, bool) {
	td, dir := asNobody(t, mod)
	got := runAsNobody(t, dir, td.socket, "/v1/leases", 300, `{"memory_bytes": 1048576}`, false)
	granted := strings.Count(got, "201/")
	return fmt.Sprintf("%d of 300 granted", granted), true
}

// relStalledUpload: what a stalled upload gets within 2 s.
func relStalledUpload(t *testing.T, mod func(*config.Config)) (string, bool) {
	td := startDaemon(t, 1, 8*GiB, mod)
	conn := stalledUpload(t, td)
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "still open after 2 s", true
	}
	resp.Body.Close()
	return fmt.Sprintf("answered %d", resp.StatusCode), true
}

// relDiskFloor: what an upload gets when the disk is below the floor (a
// floor above any disk's size).
func relDiskFloor(t *testing.T, mod func(*config.Config)) (string, bool) {
	td := startDaemon(t, 1, 8*GiB, func(c *config.Config) {
		mod(c)
		if c.Jobs.MinFreeDisk > 0 {
			c.Jobs.MinFreeDisk = units.Bytes(1 << 60)
		}
	})
	status, _ := upload(t, td.socket, 100)
	_, health := td.raw("GET", "/healthz", "")
	low := strings.Contains(health, "disk_low")
	return fmt.Sprintf("upload %d, healthz disk_low=%v", status, low), true
}

// relTCP401: TCP connections still open 1 s after a 401, of 100.
func relTCP401(t *testing.T) (string, bool) {
	td := startDaemon(t, 1, 8*GiB, func(c *config.Config) {
		shipped(c)
		c.Daemon.HTTPListen, c.Daemon.HTTPToken = "127.0.0.1:0", testToken
	})
	var conns []net.Conn
	for range 100 {
		conn, err := net.Dial("tcp", td.d.tcpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: wsched\r\n\r\n")
		conns = append(conns, conn)
	}
	time.Sleep(time.Second)
	open := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, nil); err == nil {
			resp.Body.Close()
		}
		if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) {
			open++
		}
	}
	return fmt.Sprintf("%d of 100 open", open), open == 0
}

func TestReliability(t *testing.T) {
	out := os.Getenv("WSCHED_RELIABILITY")
	if out == "" {
		t.Skip("run by `make reliability` (WSCHED_RELIABILITY names the table file)")
	}
	rec := &relRecorder{t: t}
	relIssue14(rec)
	// Issue 25: one recorder call per area, each in a file of its own.
	relIssue25Store(rec)
	relIssue25Engine(rec)
	relIssue25HTTP(rec)
	relIssue25Jobs(rec)
	if err := os.WriteFile(out, []byte(relTable(rec.rows)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, r := range rec.rows {
		if !r.pass {
			t.Errorf("scenario %q failed: before %s, after %s", r.scenario, r.before, r.after)
		}
	}
}

// relRecorder collects the table's rows as the scenarios run.
type relRecorder struct {
	t    *testing.T
	rows []relRow
}

// pair runs f with the protection off and with the shipped defaults and
// records one row; pass judges the two figures.
func (r *relRecorder) pair(name, figure string, f func(*testing.T, func(*config.Config)) (string, bool), pass func(before, after string) bool) {
	var before, after string
	var okB, okA bool
	r.t.Run(name+"/before", func(t *testing.T) { before, okB = f(t, unprotected) })
	r.t.Run(name+"/after", func(t *testing.T) { after, okA = f(t, shipped) })
	r.rows = append(r.rows, relRow{name, figure, before, after, okB && okA && pass(before, after)})
}

// single records a scenario whose fix cannot be turned off: before is the
// finding the issue reported, f measures the daemon as it is now.
func (r *relRecorder) single(name, figure, before string, f func(*testing.T) (string, bool)) {
	var fig string
	var ok bool
	r.t.Run(name, func(t *testing.T) { fig, ok = f(t) })
	r.rows = append(r.rows, relRow{name, figure, before, fig, ok})
}

// relIssue14 is the table of issue 14.
func relIssue14(rec *relRecorder) {
	rec.pair("idle keep-alive, one uid", "connections still open 1 s after their request", relIdle,
		func(b, a string) bool { return strings.HasPrefix(a, "0 of 200") && !strings.HasPrefix(b, "0 of 200") })
	rec.pair("many leases, one uid", "leases granted", relLeases,
		func(b, a string) bool { return b == "300 of 300 granted" && a == "256 of 300 granted" })
	rec.pair("stalled upload", "answer within 2 s", relStalledUpload,
		func(b, a string) bool { return a == "answered 408" })
	rec.pair("disk below floor", "upload answer", relDiskFloor,
		func(b, a string) bool { return strings.HasPrefix(a, "upload 507, healthz disk_low=true") })
	rec.single("TCP after 401", "connections open 1 s after a 401", "issue: 3000 held", relTCP401)
	rec.pair("300 unread /v1/events, one uid", "grant+release pairs/s", relEvents,
		func(b, a string) bool { return strings.HasPrefix(a, "16 streams") })
	rec.single("damaged bbolt meta page", "start, then leases after repair", "issue: 4 GiB lease lost, granted again", relCorruptMeta)
}

func relTable(rows []relRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %-30s | %-46s | %-46s | %-46s | %s |\n", "scenario", "figure", "before (protection off)", "after (defaults)", "pass")
	fmt.Fprintf(&b, "|%s|%s|%s|%s|------|\n", strings.Repeat("-", 32), strings.Repeat("-", 48), strings.Repeat("-", 48), strings.Repeat("-", 48))
	for _, r := range rows {
		fmt.Fprintf(&b, "| %-30s | %-46s | %-46s | %-46s | %-4v |\n", r.scenario, r.figure, r.before, r.after, r.pass)
	}
	return b.String()
}
