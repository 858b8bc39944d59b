package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/plugins/plugintest"
)

// fakePlugins holds the scripted fake backend, built once per test binary
// into a plugin directory of its own.
var fakePlugins pluginBuild

func fakeBackendDir(t *testing.T) string {
	return fakePlugins.dir(t, "wsched-fake-plugins-", [2]string{plugintest.FakeBinaryName, plugintest.FakePackage})
}

// pluginBuild builds backends (name, package) into a plugin directory
// under fakeRoot, once per test binary.
type pluginBuild struct {
	once sync.Once
	path string
	err  error
}

func (p *pluginBuild) dir(t *testing.T, prefix string, bins ...[2]string) string {
	t.Helper()
	p.once.Do(func() {
		dir, err := os.MkdirTemp(fakeRoot, prefix)
		if err != nil {
			p.err = err
			return
		}
		_ = os.Chmod(dir, 0o755)
		for _, b := range bins {
			if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, b[0]), b[1]).CombinedOutput(); err != nil {
				p.err = fmt.Errorf("build %s: %v\n%s", b[0], err, out)
				return
			}
		}
		p.path = dir
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.path
}

// jobDaemon serves one 24 GiB simulated GPU, the fake backend, and a model
// "fake-tiny" of the given lease size.
func jobDaemon(t *testing.T, modelMemory int64, mod func(*config.Config)) (*testDaemon, string) {
	t.Helper()
	plugins := fakeBackendDir(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "fake-tiny.bin")
	audio := filepath.Join(dir, "audio.wav")
	_ = os.WriteFile(model, []byte("model"), 0o644)
	_ = os.WriteFile(audio, []byte("RIFF fake audio"), 0o644)
	td := startDaemon(t, 1, 24*GiB, func(c *config.Config) {
		c.Backends.PluginDir, c.Backends.DevDirs = plugins, nil
		c.Models.Dir = filepath.Join(dir, "models")
		c.Models.Entries = []config.Model{{Name: "fake-tiny", Backend: "fake", Path: model, Memory: units.Bytes(modelMemory)}}
		c.Models.Default = "fake-tiny"
		if mod != nil {
			mod(c)
		}
	})
	return td, audio
}

func (td *testDaemon) submit(t *testing.T, body string) jobs.Job {
	t.Helper()
	status, out := td.raw("POST", "/v1/jobs", body)
	if status != http.StatusAccepted {
		t.Fatalf("POST /v1/jobs %s: %d %s", body, status, out)
	}
	var j jobs.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	return j
}

func (td *testDaemon) job(t *testing.T, id string) jobs.Job {
	t.Helper()
	status, out := td.raw("GET", "/v1/jobs/"+id, "")
	if status != http.StatusOK {
		t.Fatalf("GET job: %d %s", status, out)
	}
	var j jobs.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	return j
}

func (td *testDaemon) waitJob(t *testing.T, id string, done func(jobs.Job) bool) jobs.Job {
	t.Helper()
	for i := 0; ; i++ {
		j := td.job(t, id)
		if done(j) {
			return j
		}
		if i > 3000 {
			t.Fatalf("job %s stuck in %s: %+v", id, j.State, j)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func finished(j jobs.Job) bool { return j.State.Finished() }

// TestJobStatesInOrder reads a job's SSE stream: pending, loading,
// processing, completed, with progress and segments between.
func TestJobStatesInOrder(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.SegmentDelay), "20ms")
	td, audio := jobDaemon(t, 4*GiB, nil)
	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q, "format": "srt"}`, audio))
	resp, err := sseGet(td, "/v1/jobs/"+j.ID+"/events")
	if err != nil {
		t.Fatal(err)
	}
	var states, kinds []string
	err = client.ReadSSE(resp.Body, func(event, data string) error {
		kinds = append(kinds, event)
		if event == "state" {
			var ev jobs.Event
			_ = json.Unmarshal([]byte(data), &ev)
			states = append(states, string(ev.State))
		}
		return nil
	})
	resp.Body.Close()
	if got := strings.Join(states, " "); got != "pending loading processing completed" || err != nil {
		t.Errorf("states %q (%v); events %v", got, err, kinds)
	}
	if !strings.Contains(strings.Join(kinds, " "), "segment") || kinds[len(kinds)-1] != "end" {
		t.Errorf("events %v: want segments and a final end", kinds)
	}
	got := td.job(t, j.ID)
	if got.Result == nil || len(got.Result.Segments) != 3 || got.Attempts != 1 || got.LeaseID == "" || got.GPUIndex != 0 {
		t.Errorf("job = %+v", got)
	}
}

func sseGet(td *testDaemon, path string) (*http.Response, error) {
	return unixHTTP(td.socket).Get("http://wsched" + path)
}

// TestJobsWaitInPriorityOrder fills the GPU with a lease; a low then a high
// priority job wait for memory; when it frees, the high one runs first, and
// a cancelled queued job never starts.
func TestJobsWaitInPriorityOrder(t *testing.T) {
	td, audio := jobDaemon(t, 14*GiB, nil)
	ctx := context.Background()
	hog, err := td.c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 20 * GiB})
	if err != nil {
		t.Fatal(err)
	}
	low := td.submit(t, fmt.Sprintf(`{"audio_path": %q, "priority": "low"}`, audio))
	waitQueued(t, td, 1)
	high := td.submit(t, fmt.Sprintf(`{"audio_path": %q, "priority": "high"}`, audio))
	waitQueued(t, td, 2)
	never := td.submit(t, fmt.Sprintf(`{"audio_path": %q, "priority": "high"}`, audio))
	waitQueued(t, td, 3)
	if status, out := td.raw("DELETE", "/v1/jobs/"+never.ID, ""); status != http.StatusOK {
		t.Fatalf("cancel: %d %s", status, out)
	}
	if _, err := td.c.Release(ctx, hog.ID); err != nil {
		t.Fatal(err)
	}
	h, l := td.waitJob(t, high.ID, finished), td.waitJob(t, low.ID, finished)
	if h.State != jobs.Completed || l.State != jobs.Completed {
		t.Fatalf("high %s, low %s", h.State, l.State)
	}
	if !h.Timings[jobs.Loading].Entered.Before(l.Timings[jobs.Loading].Entered) {
		t.Errorf("low started %v, high %v: want high first", l.Timings[jobs.Loading].Entered, h.Timings[jobs.Loading].Entered)
	}
	n := td.job(t, never.ID)
	if n.State != jobs.Cancelled || n.Attempts > 1 {
		t.Errorf("cancelled job: %+v", n)
	}
	for _, hs := range n.History {
		if hs.State == jobs.Loading || hs.State == jobs.Processing {
			t.Errorf("the cancelled job started: %+v", n.History)
		}
	}
}

// TestBackendKilledMidJob kills -9 the backend while it transcribes: the job
// is retried and completes (attempts = 2), and no lease leaks.
func TestBackendKilledMidJob(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.SegmentDelay), "100ms")
	t.Setenv(plugintest.Env(plugintest.Segments), "10")
	td, audio := jobDaemon(t, 4*GiB, func(c *config.Config) { c.Backends.KeepAlive = units.Duration(-1) })
	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	td.waitJob(t, j.ID, func(j jobs.Job) bool { return j.State == jobs.Processing })
	l, err := td.c.Lease(context.Background(), td.job(t, j.ID).LeaseID)
	if err != nil || len(l.PIDs) == 0 {
		t.Fatalf("backend lease: %+v %v", l, err)
	}
	time.Sleep(150 * time.Millisecond)
	_ = syscall.Kill(l.PIDs[len(l.PIDs)-1], syscall.SIGKILL)
	got := td.waitJob(t, j.ID, finished)
	if got.State != jobs.Completed || got.Attempts != 2 {
		t.Errorf("after kill -9: %s, %d attempts, error %q", got.State, got.Attempts, got.Error)
	}
	for i := 0; ; i++ { // keep_alive < 0: the instance and its lease go at release
		ls, _ := td.c.Leases(context.Background())
		if len(ls) == 0 {
			break
		}
		if i > 1000 {
			t.Fatalf("leaked leases: %+v", ls)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestJobFailuresNameTheCause(t *testing.T) {
	td, audio := jobDaemon(t, 4*GiB, func(c *config.Config) {
		c.Models.Entries = append(c.Models.Entries, config.Model{Name: "orphan", Backend: "nosuch", Path: "/etc/hostname", Memory: units.Bytes(GiB)})
	})
	tests := []struct{ body, want string }{
		{fmt.Sprintf(`{"audio_path": %q, "model": "ghost"}`, audio), `model "ghost" (known: fake-tiny, orphan): unknown model`},
		{fmt.Sprintf(`{"audio_path": %q, "model": "orphan"}`, audio), `no such backend`},
	}
	for _, tt := range tests {
		j := td.submit(t, tt.body)
		got := td.waitJob(t, j.ID, finished)
		if got.State != jobs.Failed || got.Attempts != 1 || !strings.Contains(got.Error, tt.want) || got.ErrorKind != "bad_input" {
			t.Errorf("%s: %s %q (%s), want failed naming %q", tt.body, got.State, got.Error, got.ErrorKind, tt.want)
		}
	}
}

// TestOpenAITranscriptions answers each response format with OpenAI's
// content type and shape, from a multipart upload.
func TestOpenAITranscriptions(t *testing.T) {
	td, audio := jobDaemon(t, 4*GiB, nil)
	for _, tt := range []struct{ format, ctype, prefix string }{
		{"json", "application/json", `{"text":`},
		{"text", "text/plain; charset=utf-8", ""},
		{"srt", "text/plain; charset=utf-8", "1\n00:00:00,000 --> "},
		{"vtt", "text/plain; charset=utf-8", "WEBVTT\n\n00:00:00.000 --> "},
		{"verbose_json", "application/json", `{"task":"transcribe","language":`},
	} {
		status, ctype, body := postMultipart(t, td, "/v1/audio/transcriptions", audio, map[string]string{"model": "whisper-1", "response_format": tt.format})
		if status != 200 || ctype != tt.ctype || !strings.HasPrefix(body, tt.prefix) {
			t.Errorf("%s: %d %q %q", tt.format, status, ctype, body)
		}
	}
	status, _, body := postMultipart(t, td, "/v1/audio/translations", audio, map[string]string{"model": "fake-tiny", "response_format": "verbose_json"})
	if status != 200 || !strings.HasPrefix(body, `{"task":"translate"`) {
		t.Errorf("translation: %d %s", status, body)
	}
	status, _, body = postMultipart(t, td, "/v1/audio/transcriptions", audio, map[string]string{"model": "fake-tiny", "response_format": "docx"})
	if status != 400 || !strings.Contains(body, `"type":"invalid_request_error"`) {
		t.Errorf("bad format: %d %s", status, body)
	}
	status, out := td.raw("GET", "/v1/models", "")
	if status != 200 || !strings.Contains(out, `"id":"fake-tiny"`) || !strings.Contains(out, `"object":"list"`) {
		t.Errorf("models: %d %s", status, out)
	}
}

func postMultipart(t *testing.T, td *testDaemon, path, file string, fields map[string]string) (int, string, string) {
	t.Helper()
	var buf strings.Builder
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	fw, _ := mw.CreateFormFile("file", filepath.Base(file))
	data, _ := os.ReadFile(file)
	_, _ = fw.Write(data)
	_ = mw.Close()
	resp, err := unixHTTP(td.socket).Post("http://wsched"+path, mw.FormDataContentType(), strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b.String()
}

// unixHTTP is an HTTP client that dials the daemon's socket.
func unixHTTP(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

// TestAudioPathIsSnapshotted: the daemon copies audio named by path at
// submit, after checking it as the client, so re-pointing a symlink later
// changes nothing; a FIFO is refused rather than blocking the daemon.
func TestAudioPathIsSnapshotted(t *testing.T) {
	td, _ := jobDaemon(t, 10*GiB, nil)
	if _, err := td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: 20 * GiB}); err != nil {
		t.Fatal(err) // the job waits for memory while we look at its audio
	}
	dir := t.TempDir()
	ok, secret, link := filepath.Join(dir, "ok.wav"), filepath.Join(dir, "secret.wav"), filepath.Join(dir, "link.wav")
	_ = os.WriteFile(ok, []byte("RIFF-ok"), 0o644)
	_ = os.WriteFile(secret, []byte("RIFF-secret"), 0o600)
	_ = os.Symlink(ok, link)
	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, link))
	_ = os.Remove(link)
	_ = os.Symlink(secret, link)
	waitQueued(t, td, 1)
	got, err := os.ReadFile(j.Spec.AudioPath)
	if err != nil || string(got) != "RIFF-ok" || !j.Spec.Uploaded || !strings.HasPrefix(j.Spec.AudioPath, filepath.Join(td.cfg.Daemon.StateDir, "uploads")) {
		t.Errorf("job audio %q (uploaded %v) holds %q, %v; want the snapshot of ok.wav", j.Spec.AudioPath, j.Spec.Uploaded, got, err)
	}
	fifo := filepath.Join(dir, "fifo.wav")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	status, out := td.raw("POST", "/v1/jobs", fmt.Sprintf(`{"audio_path": %q}`, fifo))
	if status != http.StatusBadRequest || !strings.Contains(out, "not a regular file") {
		t.Errorf("FIFO: %d %s", status, out)
	}
	if status, out := td.raw("DELETE", "/v1/jobs/"+j.ID, ""); status != http.StatusOK {
		t.Fatalf("cancel: %d %s", status, out)
	}
	if _, err := os.Stat(j.Spec.AudioPath); !os.IsNotExist(err) {
		t.Errorf("the audio copy outlived its cancelled job: %v", err)
	}
}

// TestOOMRetriesGrowOneEstimate: a backend that always runs out of memory
// gets 1 + max_retries attempts on fresh instances with leases of E, 1.5 E,
// 2.25 E, 3.375 E — the same estimate scaled, never compounded with
// learning — and the job fails naming the OOM.
func TestOOMRetriesGrowOneEstimate(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.TranscribeError), "oom")
	td, audio := jobDaemon(t, 2*GiB, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := liveEvents(t, ctx, td)
	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	got := td.waitJob(t, j.ID, finished)
	if got.State != jobs.Failed || got.Attempts != 4 || !strings.Contains(got.Error, "out of memory") || got.OOMFactor != 1.5*1.5*1.5 {
		t.Fatalf("job: %s after %d attempts, factor %v, error %q", got.State, got.Attempts, got.OOMFactor, got.Error)
	}
	var sizes []int64
	for len(sizes) < 4 {
		if ev := recv(t, events); ev.Type == "granted" && ev.Lease.Holder.Name == "wsched-backend-fake" {
			sizes = append(sizes, ev.Lease.MemoryBytes)
		}
	}
	if want := []int64{2 * GiB, 3 * GiB, 9 * GiB / 2, 27 * GiB / 4}; fmt.Sprint(sizes) != fmt.Sprint(want) {
		t.Errorf("leases per attempt %v, want %v", sizes, want)
	}
}
