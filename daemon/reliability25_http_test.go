package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/config"
)

// relIssue25HTTP adds the rows of issue 25 for listeners, spool, monitor streams and the CLI (items 7–9, 15, 17, 19).
// None of these fixes can be turned off by a setting: before is the issue's finding.
func relIssue25HTTP(rec *relRecorder) {
	rec.single("TCP flood, no token (25.7)", "local root requests refused, of 108", "issue: 104 of 108 refused 503", relTCPFlood)
	rec.single("concurrent uploads (25.8)", "spool with 16 uploads in progress, quota 1 MiB", "issue: 4.2× spool_quota; ENOSPC 400", relUploadRace)
	rec.single("upload cut by a crash (25.15)", "its spool file after a start", "issue: kept, counted against the quota", relOrphan)
	rec.single("250 leases, 16 monitors (25.9)", "another client's grant+release pairs/s", "issue: 924/s → 18/s; 60 KiB labels taken", relMonitorStreams)
	rec.single("estimate --model FIFO (25.17)", "answer within 10 s", "issue: hangs", relEstimateFIFO)
	rec.single("hub test, lagged reader (25.19)", "go test -race -count=20 (2 CPUs)", "issue: 2 of 20 runs hang", relHubTest)
}

// relTCPFlood: 300 TCP connections that never send a token (the TCP
// budget is 256), then 108 requests of root over the Unix socket.
func relTCPFlood(t *testing.T) (string, bool) {
	td := startDaemon(t, 1, 8*GiB, func(c *config.Config) {
		shipped(c)
		c.Daemon.HTTPListen, c.Daemon.HTTPToken = "127.0.0.1:0", testToken
	})
	tcpRefused := tcpFlood(t, td.d.tcpAddr, 300)
	refused := unixRequests(t, td.socket, 108)
	return fmt.Sprintf("%d of 108 (TCP: %d of 300 refused 503)", refused, tcpRefused),
		refused == 0 && tcpRefused == 300-td.cfg.Daemon.TCPMaxConnections
}

// relUploadRace: 16 uploads of 200 KiB in progress at once against
// spool_quota 1 MiB; then an upload whose file system fills under it.
func relUploadRace(t *testing.T) (string, bool) {
	admitted, refused, used := uploadRace(t)
	fig := fmt.Sprintf("%.2f× quota (%d admitted, %d got 507)", float64(used)/(1<<20), admitted, refused)
	ok := used <= 1<<20
	var disk string
	t.Run("full disk", func(t *testing.T) {
		status, _, left := fullDiskUpload(t) // skips without root
		disk = fmt.Sprintf("; ENOSPC %d", status)
		ok = ok && status == http.StatusInsufficientStorage && left == 0
	})
	return fig + disk, ok
}

// relOrphan: a 6 KiB upload no job refers to, under spool_quota 8 KiB.
func relOrphan(t *testing.T) (string, bool) {
	kept, status := orphanAfterStart(t)
	fig := "removed"
	if kept {
		fig = "kept"
	}
	return fmt.Sprintf("%s; a 3 KiB upload then: %d", fig, status), !kept && status == http.StatusAccepted
}

// relMonitorStreams: grant+release pairs per second of a client of its own
// while 250 leases with 4,000 bytes of labels each are held and 16 monitor
// streams are read, against none; and a lease asking for a 60 KiB label.
func relMonitorStreams(t *testing.T) (string, bool) {
	td := startDaemon(t, 1, 80*GiB, nil)
	holdLeases(t, td, 250, 4000)
	base := grantRate(t, td, time.Second)
	monitorStreams(t, td.socket, 16)
	loaded := grantRate(t, td, time.Second)
	status, _ := td.raw("POST", "/v1/leases", fmt.Sprintf(`{"memory_bytes": 1048576, "labels": {"note": %q}}`, strings.Repeat("x", 60<<10)))
	return fmt.Sprintf("%.0f/s (%.0f/s without); 60 KiB label: %d", loaded, base, status), loaded > 0 && status == http.StatusBadRequest
}

// cliBuild is the wsched CLI, built once per test binary.
var cliBuild pluginBuild

// relEstimateFIFO: `wsched estimate --model FIFO`.
func relEstimateFIFO(t *testing.T) (string, bool) {
	bin := filepath.Join(cliBuild.dir(t, "wsched-cli-", [2]string{"wsched", "github.com/wsched/wsched/cmd/wsched"}), "wsched")
	fifo := filepath.Join(t.TempDir(), "ggml-fifo.bin")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, bin, "estimate", "--model", fifo, "--config", "../testdata/sim-8x4090.toml").CombinedOutput()
	if ctx.Err() != nil {
		return "still running after 10 s", false
	}
	_, said, found := strings.Cut(string(out), "is not a regular file")
	said, _, _ = strings.Cut(said, ";")
	return fmt.Sprintf("exit %v in %s: not a regular file%s", exitCode(err), time.Since(start).Round(time.Millisecond), said), err != nil && found
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// relHubTest runs the hub's "lagged" reader test 20 times under -race
// with 2 CPUs, each run bounded by the go test timeout.
func relHubTest(t *testing.T) (string, bool) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not in PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-race", "-cpu", "2", "-count=20", "-timeout", "2m", "-v",
		"-run", "^TestHubOneEngineSubscriptionDropsTheSlow$", "./httpapi/")
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	passed := strings.Count(string(out), "--- PASS: TestHubOneEngineSubscriptionDropsTheSlow")
	if err != nil {
		t.Logf("go test: %v\n%s", err, firstLine(string(out), 2000))
	}
	return fmt.Sprintf("%d of 20 passed", passed), err == nil && passed == 20
}
