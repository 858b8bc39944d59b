package preload_test

import (
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/enforce/preload"
	"github.com/wsched/wsched/internal/testtmp"
)

// standIn is a stand-in daemon on a Unix socket: the usage reports it
// receives, with their method and path.
type standIn struct {
	sock  string
	got   chan api.UsageReport
	paths chan string
}

func newStandIn(t *testing.T) standIn {
	s := standIn{sock: filepath.Join(testtmp.ShortDir(t), "w.sock"), got: make(chan api.UsageReport, 16), paths: make(chan string, 16)}
	ln, err := net.Listen("unix", s.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u api.UsageReport
		if err := json.NewDecoder(r.Body).Decode(&u); err != nil {
			t.Errorf("report body: %v", err)
		}
		s.paths <- r.Method + " " + r.URL.Path
		s.got <- u
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// expect runs the test program with args under a lease of 1000 bytes with
// 500 to borrow, reporting to s, and checks that at each of its pauses the
// next report of want has arrived.
func (s standIn) expect(t *testing.T, k kit, want []api.UsageReport, args ...string) {
	env := preload.Env(k.lib, "", 1000, 500, s.sock)
	env["WSCHED_LEASE_ID"], env["WSCHED_MEMORY_BYTES"] = "l-0123abcd", "1000"
	h := k.start(t, env, args...)
	defer h.stop()
	out := h.out
	for i, w := range want {
		for out.Scan() && out.Text() != "paused" {
		}
		select {
		case u := <-s.got:
			if p := <-s.paths; p != "POST /v1/leases/l-0123abcd/usage" {
				t.Errorf("report %d went to %q", i, p)
			}
			w.PID = h.cmd.Process.Pid
			if u != w {
				t.Errorf("report %d: %+v, want %+v", i, u, w)
			}
		case <-time.After(30 * time.Second): // a hang, not a timing assertion
			t.Fatalf("no report %d while the holder is paused", i)
		}
		_, _ = h.stdin.Write([]byte("\n"))
	}
}

// The library's reports, as a stand-in daemon on the socket receives them:
// passing the lease (borrowing), a refusal past the cap, and a free that
// brings the total back within the lease, each sent while the holder is
// paused right after the allocation or free that caused it.
func TestReportsReachSocket(t *testing.T) {
	newStandIn(t).expect(t, buildKit(t), []api.UsageReport{
		{UsedBytes: 1200, PeakBytes: 1200, LimitBytes: 1500},                                            // borrowing
		{UsedBytes: 1200, PeakBytes: 1200, LimitBytes: 1500, RefusedBytes: 400, RefusedTotalBytes: 400}, // refused
		{UsedBytes: 800, PeakBytes: 1200, LimitBytes: 1500, RefusedTotalBytes: 400},                     // back within
	}, "direct", "800", "400", "pause", "400", "pause", "-2", "pause")
}

// A pitched allocation the driver rounds up counts at its pitch: the
// rounding that takes the total past the lease is reported (borrowing) and
// is the peak a later refusal reports (it was neither before: the
// correction only added to the total).
func TestPitchRoundingReported(t *testing.T) {
	// 900 bytes in one row: the fake driver's pitch is 1024
	newStandIn(t).expect(t, buildKit(t), []api.UsageReport{
		{UsedBytes: 1024, PeakBytes: 1024, LimitBytes: 1500},                                            // borrowing, by the pitch
		{UsedBytes: 1024, PeakBytes: 1024, LimitBytes: 1500, RefusedBytes: 600, RefusedTotalBytes: 600}, // refused
	}, "entry=cuMemAllocPitch_v2", "900", "pause", "600", "pause")
}
