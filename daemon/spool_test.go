package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
)

// upload posts a job with a file part of size bytes and returns the answer.
func upload(t *testing.T, socket string, size int) (int, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "a.wav")
	fw.Write(bytes.Repeat([]byte{1}, size))
	mw.Close()
	return postForm(t, socket, "/v1/jobs", &buf, mw.FormDataContentType())
}

// postForm posts body (multipart, of contentType) to path on its own
// connection and returns the answer's status and body.
func postForm(t *testing.T, socket, path string, body io.Reader, contentType string) (int, string) {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := http.NewRequest("POST", "http://wsched"+path, body)
	req.Header.Set("Content-Type", contentType)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func TestUploadsRefusedBelowFreeSpaceFloor(t *testing.T) {
	// No test can fill the disk; a floor above any disk's size puts every
	// disk below it.
	td := startDaemon(t, 1, 8*GiB, func(c *config.Config) { c.Jobs.MinFreeDisk = units.Bytes(1 << 60) })
	status, body := upload(t, td.socket, 100)
	if status != http.StatusInsufficientStorage || !strings.Contains(body, "[jobs] min_free_disk") {
		t.Errorf("upload below the floor: %d %s, want 507 naming [jobs] min_free_disk", status, body)
	}
	if _, body := td.raw("GET", "/healthz", ""); !strings.Contains(body, `"disk_low"`) {
		t.Errorf("/healthz below the floor: %s, want status disk_low", body)
	}
	// Leases still work.
	if status, body := td.raw("POST", "/v1/leases", `{"memory_bytes": 1048576}`); status != http.StatusCreated {
		t.Errorf("lease with the disk low: %d %s", status, body)
	}
}

func TestSpoolDirAndQuota(t *testing.T) {
	spool := filepath.Join(t.TempDir(), "spool")
	td := startDaemon(t, 1, 8*GiB, func(c *config.Config) {
		c.Jobs.SpoolDir, c.Jobs.MaxUpload, c.Jobs.SpoolQuota = spool, units.Bytes(4*units.KiB), units.Bytes(8*units.KiB)
	})
	if err := os.MkdirAll(spool, 0o750); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(spool, "stale")
	if err := os.WriteFile(stale, make([]byte, 6<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	// 6 KiB of 8 used: a 3 KiB upload (within max_upload) passes the quota.
	status, body := upload(t, td.socket, 3<<10)
	if status != http.StatusInsufficientStorage || !strings.Contains(body, "spool_quota") {
		t.Errorf("upload past the quota: %d %s, want 507 naming spool_quota", status, body)
	}
	os.Remove(stale)
	if status, body := upload(t, td.socket, 3<<10); status != http.StatusAccepted {
		t.Fatalf("upload within the quota: %d %s", status, body)
	}
	if _, err := os.Stat(filepath.Join(td.cfg.Daemon.StateDir, "uploads")); !os.IsNotExist(err) {
		t.Errorf("an upload went under the state dir with [jobs] spool_dir set: %v", err)
	}
}

// stalledUpload starts an upload of 100,000 bytes that sends a few and
// stops; the connection is closed when the test ends.
func stalledUpload(t *testing.T, td *testDaemon) net.Conn {
	t.Helper()
	conn, err := net.Dial("unix", td.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprint(conn, "POST /v1/jobs HTTP/1.1\r\nHost: wsched\r\nContent-Type: multipart/form-data; boundary=XX\r\nContent-Length: 100000\r\n\r\n"+
		"--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nRIFF....")
	return conn
}

func TestStalledUploadIsCut(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, func(c *config.Config) { c.Jobs.UploadTimeout = units.Duration(200 * time.Millisecond) })
	conn := stalledUpload(t, td)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("a stalled upload got no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("stalled upload: %d, want 408", resp.StatusCode)
	}
}
