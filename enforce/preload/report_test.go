package preload_test

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/enforce/preload"
	"github.com/wsched/wsched/internal/testtmp"
)

// The library's reports, as a stand-in daemon on the socket receives them:
// passing the lease (borrowing), a refusal past the cap, and a free that
// brings the total back within the lease, each sent while the holder is
// paused right after the allocation or free that caused it.
func TestReportsReachSocket(t *testing.T) {
	k := buildKit(t)
	sock := filepath.Join(testtmp.ShortDir(t), "w.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan api.UsageReport, 16)
	paths := make(chan string, 16)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u api.UsageReport
		if err := json.NewDecoder(r.Body).Decode(&u); err != nil {
			t.Errorf("report body: %v", err)
		}
		paths <- r.Method + " " + r.URL.Path
		got <- u
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	env := preload.Env(k.lib, "", 1000, 500, sock)
	env["WSCHED_LEASE_ID"], env["WSCHED_MEMORY_BYTES"] = "l-0123abcd", "1000"
	cmd := exec.Command(k.alloc, "direct", "800", "400", "pause", "400", "pause", "-2", "pause")
	cmd.Env = os.Environ()
	for key, v := range env {
		cmd.Env = append(cmd.Env, key+"="+v)
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	out := bufio.NewScanner(stdout)
	want := []api.UsageReport{
		{UsedBytes: 1200, PeakBytes: 1200, LimitBytes: 1500},                                            // borrowing
		{UsedBytes: 1200, PeakBytes: 1200, LimitBytes: 1500, RefusedBytes: 400, RefusedTotalBytes: 400}, // refused
		{UsedBytes: 800, PeakBytes: 1200, LimitBytes: 1500, RefusedTotalBytes: 400},                     // back within
	}
	for i, w := range want {
		for out.Scan() && out.Text() != "paused" {
		}
		select {
		case u := <-got:
			if p := <-paths; p != "POST /v1/leases/l-0123abcd/usage" {
				t.Errorf("report %d went to %q", i, p)
			}
			w.PID = cmd.Process.Pid
			if u != w {
				t.Errorf("report %d: %+v, want %+v", i, u, w)
			}
		case <-time.After(30 * time.Second): // a hang, not a timing assertion
			t.Fatalf("no report %d while the holder is paused", i)
		}
		_, _ = stdin.Write([]byte("\n"))
	}
}
