package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/placement"
)

func rawRequest(t *testing.T, conn net.Conn, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://wsched"+path, strings.NewReader(body))
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

func errCode(t *testing.T, body string) api.ErrorDetail {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(body), &eb); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return eb.Error
}

func TestLeaseLifecycle(t *testing.T) {
	td := startDaemon(t, 1, 24*GiB, nil)
	ctx := context.Background()
	if m := fileMode(t, td.socket); m != 0o666 {
		t.Errorf("socket mode %o, want the configured 0666", m)
	}
	a, err := td.c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 20 * GiB})
	if err != nil {
		t.Fatal(err)
	}
	if a.State != "granted" || a.Env["CUDA_VISIBLE_DEVICES"] != a.GPUUUID || a.Env["SENSEVOICE_DEVICE"] != "cuda:0" ||
		a.Env["WSCHED_MEMORY_FRACTION"] != "0.8333" || a.Env["CUDA_DEVICE_ORDER"] != "PCI_BUS_ID" || a.Env["WSCHED_LEASE_ID"] != a.ID {
		t.Errorf("granted lease = %+v", a)
	}
	// Does not fit now, no wait: 409.
	status, body := td.raw("POST", "/v1/leases", `{"memory_bytes": 10737418240}`)
	if status != http.StatusConflict || errCode(t, body).Code != "no_fit" {
		t.Errorf("no fit: %d %s", status, body)
	}
	// With wait_seconds: a long poll answered when the first lease goes.
	got := make(chan error, 1)
	var waited api.Lease
	go func() {
		var err error
		waited, err = td.c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 10 * GiB, WaitSeconds: 30})
		got <- err
	}()
	waitQueued(t, td, 1)
	if _, err := td.c.Renew(ctx, a.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := td.c.Release(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil || waited.State != "granted" {
		t.Fatalf("long poll: %+v %v", waited, err)
	}
	again, err := td.c.Release(ctx, a.ID)
	if err != nil || again.State != "released" {
		t.Errorf("second release: %+v %v", again, err)
	}
	if _, err := td.c.Lease(ctx, "l-nope"); !client.IsCode(err, "not_found") {
		t.Errorf("unknown lease: %v", err)
	}
	// Timeout: 504.
	status, body = td.raw("POST", "/v1/leases", `{"memory_bytes": 21474836480, "wait_seconds": 0.2}`)
	if status != http.StatusGatewayTimeout || errCode(t, body).Code != "timeout" {
		t.Errorf("timeout: %d %s", status, body)
	}
}

func waitQueued(t *testing.T, td *testDaemon, n int) {
	t.Helper()
	for i := 0; ; i++ {
		g, err := td.c.GPUs(context.Background())
		if err == nil && len(g.Queue) == n {
			return
		}
		if i > 1000 {
			t.Fatalf("queue never reached %d", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestBadRequests(t *testing.T) {
	td := startDaemon(t, 1, 24*GiB, nil)
	huge := `{"memory_bytes": 1, "labels": {"x": "` + strings.Repeat("a", api.MaxBodyBytes) + `"}}`
	tests := []struct {
		name, method, path, body string
		status                   int
		code, msg                string
	}{
		{"huge body", "POST", "/v1/leases", huge, 413, "body_too_large", "request body is larger than 65536 bytes"},
		{"bad field type", "POST", "/v1/leases", `{"memory_bytes": "4GiB"}`, 400, "invalid_field", "field memory_bytes: want int64, got JSON string"},
		{"unknown field", "POST", "/v1/leases", `{"memory": 4}`, 400, "unknown_field", `unknown field "memory"`},
		{"bad device", "POST", "/v1/leases", `{"memory_bytes": 1, "device": "gpu0"}`, 400, "invalid_field",
			`field device: invalid device "gpu0": want one of auto, cuda, cuda:N, GPU-<uuid>, cpu`},
		{"bad priority", "POST", "/v1/leases", `{"memory_bytes": 1, "priority": "urgent"}`, 400, "invalid_field",
			`field priority: "urgent" is not allowed: want high, normal or low`},
		{"negative ttl", "POST", "/v1/leases", `{"memory_bytes": 1, "ttl_seconds": -1}`, 400, "invalid_field",
			"field ttl_seconds: -1 is not allowed: want seconds from 0"},
		{"both sizes", "POST", "/v1/leases", `{"memory_bytes": 1, "model": "tiny"}`, 400, "invalid_request", "give memory_bytes or model, not both"},
		{"empty body", "POST", "/v1/leases", ``, 400, "invalid_json", "request body is empty: want a JSON object"},
		{"malformed", "POST", "/v1/leases", `{"memory_bytes": 1`, 400, "invalid_json", "request body ends inside the JSON object"},
		{"unknown model", "POST", "/v1/leases", `{"model": "huge-v9"}`, 400, "invalid_request", ""},
		{"too large", "POST", "/v1/leases", `{"memory_bytes": 99999999999999}`, 409, "too_large", ""},
		{"no such gpu", "POST", "/v1/leases", `{"memory_bytes": 1, "device": "cuda:4"}`, 409, "no_such_gpu", ""},
		{"no route", "GET", "/v2/nothing", ``, 404, "not_found", "no route for GET /v2/nothing"},
		{"reserved label", "POST", "/v1/leases", `{"memory_bytes": 1, "labels": {"wsched.estimate_key": "x"}}`, 400, "invalid_field",
			`field labels: "wsched.estimate_key": labels starting with "wsched." are the daemon's own`},
	}
	for _, tt := range tests {
		status, body := td.raw(tt.method, tt.path, tt.body)
		e := errCode(t, body)
		if status != tt.status || e.Code != tt.code || (tt.msg != "" && e.Message != tt.msg) {
			t.Errorf("%s: %d %+v\nwant %d %s %q", tt.name, status, e, tt.status, tt.code, tt.msg)
		}
	}
}

func TestModelLease(t *testing.T) {
	td := startDaemon(t, 1, 24*GiB, nil)
	l, err := td.c.Acquire(context.Background(), api.LeaseRequest{Model: "medium", Backend: "whisper.cpp"})
	if err != nil {
		t.Fatal(err)
	}
	est, _ := l.Estimate.(map[string]any)
	if l.MemoryBytes < GiB || est == nil || int64(est["recommended_bytes"].(float64)) != l.MemoryBytes {
		t.Errorf("model lease: %d bytes, estimate %v", l.MemoryBytes, est)
	}
}

// TestOtherUserForbidden renews and releases a root-held lease as another
// user (uid 65534 through curl): 403.
func TestOtherUserForbidden(t *testing.T) {
	if syscall.Getuid() != 0 {
		t.Skip("needs root to run a client as another uid")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	td := startDaemon(t, 1, 24*GiB, nil)
	for dir := filepath.Dir(td.socket); dir != "/tmp" && dir != "/"; dir = filepath.Dir(dir) {
		_ = os.Chmod(dir, 0o755) // let uid 65534 reach the socket
	}
	l, err := td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: GiB})
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range [][]string{{"-X", "DELETE", "http://wsched/v1/leases/" + l.ID}, {"-X", "POST", "http://wsched/v1/leases/" + l.ID + "/renew"}} {
		cmd := exec.Command(curl, append([]string{"-s", "-w", "\n%{http_code}", "--unix-socket", td.socket}, req...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("curl as nobody: %v", err)
		}
		text := strings.TrimSpace(string(out))
		cut := strings.LastIndexByte(text, '\n')
		body, code := text[:max(cut, 0)], text[cut+1:]
		if code != "403" || errCode(t, body).Message != fmt.Sprintf("lease %s belongs to uid 0; only that user or root may change it", l.ID) {
			t.Errorf("%v as uid 65534: %s %s", req, code, body)
		}
	}
	if got, _ := td.c.Lease(context.Background(), l.ID); got.State != "granted" {
		t.Errorf("lease after forbidden requests: %s", got.State)
	}
}

// TestHolderKilled kills -9 a holder process and measures how long the
// daemon takes to release its lease.
func TestHolderKilled(t *testing.T) {
	td := startDaemon(t, 1, 24*GiB, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder := exec.Command("sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	l, err := td.c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 8 * GiB, Holder: &api.HolderRequest{PID: holder.Process.Pid}})
	if err != nil {
		t.Fatal(err)
	}
	released, live := make(chan time.Time, 1), make(chan struct{})
	go func() {
		_ = td.c.Events(ctx, func(ev api.Event) error {
			switch {
			case ev.Lease.Holder.Name == "marker":
				select {
				case <-live:
				default:
					close(live)
				}
			case ev.Lease.ID == l.ID && ev.Type == "released":
				released <- time.Now()
				return errors.New("done")
			}
			return nil
		})
	}()
	// The stream is live once it shows a marker lease granted after it opened.
	for {
		if _, err := td.c.Acquire(ctx, api.LeaseRequest{Device: "cpu", Holder: &api.HolderRequest{Name: "marker"}}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-live:
		case <-time.After(100 * time.Millisecond):
			continue
		}
		break
	}
	killed := time.Now()
	_ = holder.Process.Kill()
	_ = holder.Wait()
	var at time.Time
	select {
	case at = <-released:
	case <-time.After(30 * time.Second):
		t.Fatal("no released event within 30 s of the holder's death")
	}
	t.Logf("kill -9 of the holder → lease released in %v", at.Sub(killed))
	got, _ := td.c.Lease(ctx, l.ID)
	if got.State != "released" || !strings.Contains(got.Reason, "exited") {
		t.Errorf("lease after holder death: %+v", got)
	}
}

func TestHolderMustBeSameUser(t *testing.T) {
	td := startDaemon(t, 1, 24*GiB, nil)
	status, body := td.raw("POST", "/v1/leases", `{"memory_bytes": 1, "holder": {"pid": 999999999}}`)
	if status != 400 || !strings.Contains(errCode(t, body).Message, "field holder.pid") {
		t.Errorf("missing holder pid: %d %s", status, body)
	}
}

func TestEventsAndMetrics(t *testing.T) {
	td := startDaemon(t, 2, 24*GiB, func(c *config.Config) { c.Placement.Policy = placement.PolicyBinpack })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	types := liveEvents(t, ctx, td)
	l, err := td.c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 3 * GiB, Priority: "high"})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := recv(t, types).Type, recv(t, types).Type; a != "requested" || b != "granted" {
		t.Errorf("events %s, %s", a, b)
	}
	status, body := td.raw("GET", "/metrics", "")
	for _, want := range []string{
		`wsched_gpu_memory_bytes{gpu="0",kind="leased",name="Sim GPU",uuid="` + l.GPUUUID + `"} 3.221225472e+09`,
		`wsched_leases{device="gpu",state="granted"} 1`, `wsched_grants_total 1`, `wsched_queue_length{priority="high"} 0`,
		`wsched_http_request_duration_seconds_count{code="201",route="POST /v1/leases"} 1`,
	} {
		if status != 200 || !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	g, err := td.c.GPUs(ctx)
	if err != nil || len(g.GPUs) != 2 || len(g.GPUs[0].Leases) != 1 || g.GPUs[0].Accounting.LeasedBytes != 3*GiB || g.Policy != "binpack" {
		t.Errorf("GET /v1/gpus: %+v %v", g, err)
	}
	st, err := td.c.Status(ctx)
	if err != nil || st.Leases != 1 || st.GPUs != 2 || st.Stats.Grants != 1 || st.Version != "test" {
		t.Errorf("status: %+v %v", st, err)
	}
}

// liveEvents opens GET /v1/events and returns once the daemon has
// subscribed it (its opening comment arrived); events follow on the channel.
func liveEvents(t *testing.T, ctx context.Context, td *testDaemon) <-chan api.Event {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://wsched/v1/events", nil)
	resp, err := unixHTTP(td.socket).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, ":") {
		t.Fatalf("event stream opened with %q, %v", line, err)
	}
	events := make(chan api.Event, 256)
	go func() {
		defer resp.Body.Close()
		_ = client.ReadSSE(br, func(_, data string) error {
			var ev api.Event
			if json.Unmarshal([]byte(data), &ev) == nil {
				events <- ev
			}
			return nil
		})
	}()
	return events
}

func recv(t *testing.T, ch <-chan api.Event) api.Event {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30 s")
		return api.Event{}
	}
}
