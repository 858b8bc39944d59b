package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/wsched/wsched/internal/asuser"
	"github.com/wsched/wsched/internal/config"
)

// requestsHelper runs as another uid (asuser): it sends count POSTs of body
// to path on socket, all at once ("par") or one after the other ("seq"),
// and prints each answer as
// "status/code", sorted and space separated.
func requestsHelper(args []string) int {
	socket, path, body, par := args[0], args[1], args[3], args[4] == "par"
	count, _ := strconv.Atoi(args[2])
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	out := make([]string, count)
	var wg sync.WaitGroup
	for i := range count {
		if !par {
			wg.Wait()
		}
		wg.Go(func() {
			resp, err := hc.Post("http://wsched"+path, "application/json", strings.NewReader(body))
			if err != nil {
				out[i] = "error"
				return
			}
			defer resp.Body.Close()
			var eb struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&eb)
			out[i] = fmt.Sprintf("%d/%s", resp.StatusCode, eb.Error.Code)
		})
	}
	wg.Wait()
	sort.Strings(out)
	fmt.Println(strings.Join(out, " "))
	return 0
}

// asNobody starts a daemon whose socket uid nobody can reach.
func asNobody(t *testing.T, mod func(*config.Config)) (*testDaemon, string) {
	dir := asuser.Dir(t)
	td := startDaemon(t, 1, 8*GiB, func(c *config.Config) {
		c.Daemon.Socket = filepath.Join(dir, "w.sock")
		if mod != nil {
			mod(c)
		}
	})
	return td, dir
}

func runAsNobody(t *testing.T, dir, socket, path string, count int, body string, par bool) string {
	t.Helper()
	mode := map[bool]string{false: "seq", true: "par"}[par]
	out, err := asuser.Command(context.Background(), t, dir, "requests", socket, path, strconv.Itoa(count), body, mode).CombinedOutput()
	if err != nil {
		t.Fatalf("helper as uid %d: %v: %s", asuser.Nobody, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestLimitsPerUID(t *testing.T) {
	td, dir := asNobody(t, func(c *config.Config) {
		c.Limits.Leases, c.Limits.Queued = 3, 2
	})
	tests := []struct {
		name, body string
		count      int
		par        bool
		want       string
	}{
		{"leases", `{"memory_bytes": 1048576}`, 5, false, "201/ 201/ 201/ 429/limit_exceeded 429/limit_exceeded"},
		{"min lease", `{"memory_bytes": 1}`, 1, false, "400/below_min_lease"},
		{"priority high", `{"memory_bytes": 1048576, "priority": "high"}`, 1, false, "403/forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runAsNobody(t, dir, td.socket, "/v1/leases", tt.count, tt.body, tt.par); got != tt.want {
				t.Errorf("as uid %d: %s, want %s", asuser.Nobody, got, tt.want)
			}
		})
	}
	// Root is not limited: it fills the GPU with small leases at priority high.
	for range 7 {
		if status, body := td.raw("POST", "/v1/leases", `{"memory_bytes": 1, "priority": "high"}`); status != http.StatusCreated {
			t.Fatalf("root: %d %s", status, body)
		}
	}
	if status, body := td.raw("POST", "/v1/leases", fmt.Sprintf(`{"memory_bytes": %d, "wait_seconds": 5}`, 8*GiB-7)); status != http.StatusCreated {
		t.Fatalf("root: %d %s", status, body)
	}
	// The GPU is full: nobody's requests wait 3 s in the queue;
	// past [limits] queued the rest are refused at once.
	got := runAsNobody(t, dir, td.socket, "/v1/leases", 4, `{"memory_bytes": 1048576, "wait_seconds": 3}`, true)
	if want := "429/limit_exceeded 429/limit_exceeded 504/timeout 504/timeout"; got != want {
		t.Errorf("queued as uid %d: %s, want %s", asuser.Nobody, got, want)
	}
}

func TestPriorityGroupMayAskHigh(t *testing.T) {
	td, dir := asNobody(t, func(c *config.Config) { c.Limits.PriorityGroup = "nogroup" })
	if got := runAsNobody(t, dir, td.socket, "/v1/leases", 1, `{"memory_bytes": 1048576, "priority": "high"}`, false); got != "201/" {
		t.Errorf("a member of [limits] priority_group asking high: %s, want 201/", got)
	}
}

func TestJobLimitsPerUID(t *testing.T) {
	td, dir := asNobody(t, func(c *config.Config) { c.Limits.StoredJobs = 2 })
	audio := filepath.Join(dir, "a.wav")
	if err := os.WriteFile(audio, []byte("RIFF not really a wav"), 0o644); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"audio_path": %q}`, audio)
	got := runAsNobody(t, dir, td.socket, "/v1/jobs", 3, body, false)
	if want := "202/ 202/ 429/limit_exceeded"; got != want {
		t.Errorf("3 jobs against [limits] stored_jobs = 2: %s, want %s", got, want)
	}
}
