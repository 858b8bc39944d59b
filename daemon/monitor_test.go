package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/chromiumtest"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/testtmp"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/plugins/plugintest"
)

// screenshotEnv names a file the monitor test saves its 1280×800 screenshot
// to (`make monitor-screenshot` writes docs/img/monitor.png).
const screenshotEnv = "WSCHED_MONITOR_SCREENSHOT"

// monitorDaemon serves testdata/sim-8x4090.toml's GPUs over the Unix socket
// and a loopback TCP listener, with the fake backend and model fake-tiny;
// mods adjust the config.
func monitorDaemon(t *testing.T, mods ...func(*config.Config)) (*testDaemon, string) {
	t.Helper()
	data, err := os.ReadFile("../testdata/sim-8x4090.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data, "sim-8x4090.toml")
	if err != nil {
		t.Fatal(err)
	}
	dir, sockDir := t.TempDir(), testtmp.ShortDir(t)
	model, audio := filepath.Join(dir, "fake-tiny.bin"), filepath.Join(dir, "audio.wav")
	_ = os.WriteFile(model, []byte("model"), 0o644)
	_ = os.WriteFile(audio, []byte("RIFF fake audio"), 0o644)
	cfg.Daemon.StateDir, cfg.Daemon.Socket, cfg.Daemon.SocketMode = filepath.Join(dir, "state"), filepath.Join(sockDir, "w.sock"), 0o666
	cfg.Daemon.HTTPListen, cfg.Daemon.HTTPToken = "127.0.0.1:0", testToken
	cfg.Inventory.RefreshInterval = units.Duration(200 * time.Millisecond)
	cfg.Backends.PluginDir, cfg.Backends.DevDirs = fakeBackendDir(t), nil
	cfg.Models.Dir = filepath.Join(dir, "models")
	cfg.Models.Entries = []config.Model{{Name: "fake-tiny", Backend: "fake", Path: model, Memory: units.Bytes(2 * GiB)}}
	cfg.Models.Default = "fake-tiny"
	for _, mod := range mods {
		mod(cfg)
	}
	return runDaemon(t, cfg), audio
}

// startChromium runs headless Chromium (chromiumtest) whose every request
// carries the TCP listener's token.
func startChromium(t *testing.T, width, height int) context.Context {
	t.Helper()
	ctx := chromiumtest.Start(t, width, height)
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Authorization": "Bearer " + testToken}}); err != nil {
		t.Fatalf("chromium: set the token header: %v", err)
	}
	return ctx
}

// TestMonitorPageLive loads the monitor page in Chromium over the TCP
// listener (token in a header), then grants a lease and submits a job: the
// GPU's bar, the lease list and the job row change without a reload.
func TestMonitorPageLive(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.SegmentDelay), "50ms")
	ctx := startChromium(t, 1280, 800)
	td, audio := monitorDaemon(t)
	base := "http://" + td.d.tcpAddr
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#conn.live")),
		chromedp.WaitVisible(chromedp.CSS("#gpu-7 .bar"))); err != nil {
		t.Fatalf("load the monitor page: %v", err)
	}
	loaded, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.wschedLoad = String(Math.random()); window.wschedLoad`))
	if err != nil {
		t.Fatal(err)
	}
	assertFits(ctx, t, 1280)

	status, body := td.raw("POST", "/v1/leases", `{"memory_bytes": 8589934592, "device": "cuda:1"}`)
	if status != http.StatusCreated && status != http.StatusOK {
		t.Fatalf("grant a lease: %d %s", status, body)
	}
	var lease struct{ ID string }
	_ = json.Unmarshal([]byte(body), &lease)
	// The holder (this test) uses nothing yet: the 8 GiB are leased-unrealized.
	waitJS(ctx, t, fmt.Sprintf(`document.querySelector('#gpu-1 .seg.unrealized').dataset.bytes === "%d" &&
		!!document.querySelector('#gpu-1 li[data-lease="%s"]')`, 8*GiB, lease.ID))

	job := submitOverTCP(t, base, audio)
	waitJS(ctx, t, fmt.Sprintf(`(() => { const r = document.querySelector('tr[data-job="%s"]');
		return !!r && r.querySelector('.state').textContent === "completed" && r.textContent.includes("100%%") &&
			r.textContent.includes("fake-tiny") })()`, job.ID))
	if same, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.wschedLoad`)); err != nil || same != loaded {
		t.Errorf("the page reloaded (marker %q, want %q, %v)", same, loaded, err)
	}
	// A request that cannot be granted now waits in the queue, with the
	// reason shown: GPU 0 is held by foreign processes (not reclaimable, as
	// the idle backend of the job above would be).
	go func() {
		_, _ = td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: 21 * GiB, Device: "cuda:0", WaitSeconds: 60})
	}()
	waitJS(ctx, t, `(() => { const r = document.querySelector('#queue tr[data-lease]');
		return !!r && r.querySelector('.why').textContent.includes("most available") &&
		r.querySelector('.why').textContent.includes("on GPU 0") })()`)
	if path := os.Getenv(screenshotEnv); path != "" {
		saveScreenshot(ctx, t, path)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	assertFits(ctx, t, 390)
}

// waitJS waits (bounded by the browser context) until expr is true.
func waitJS(ctx context.Context, t *testing.T, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))); err != nil {
		html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
		t.Fatalf("page never satisfied %s: %v\n%s", expr, err, html)
	}
}

// assertFits checks the page needs no horizontal scrolling at width.
func assertFits(ctx context.Context, t *testing.T, width int) {
	t.Helper()
	scroll, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if scroll > width {
		wide, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("body *")].filter((e) => e.getBoundingClientRect().right > innerWidth + 1).slice(0, 5).map((e) => e.tagName + "." + e.className + " " + Math.round(e.getBoundingClientRect().right))`))
		t.Errorf("at %d px wide the page is %d px wide: it scrolls sideways (%v)", width, scroll, wide)
	}
}

func submitOverTCP(t *testing.T, base, audio string) jobs.Job {
	t.Helper()
	var buf strings.Builder
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("model", "fake-tiny")
	fw, _ := mw.CreateFormFile("file", "audio.wav")
	data, _ := os.ReadFile(audio)
	_, _ = fw.Write(data)
	_ = mw.Close()
	req, _ := http.NewRequest("POST", base+"/v1/jobs", strings.NewReader(buf.String()))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var j jobs.Job
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(out, &j) != nil {
		t.Fatalf("submit over TCP: %d %s", resp.StatusCode, out)
	}
	return j
}

func saveScreenshot(ctx context.Context, t *testing.T, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}
