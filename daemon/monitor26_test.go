package daemon

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/plugins/plugintest"
)

// TestMonitorPageShowsExpectedStart: with [jobs] max_active 1 and a job
// that runs until cancelled, a job submitted after the page loaded waits in
// the job queue and its row shows, live, when it is expected to start.
func TestMonitorPageShowsExpectedStart(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.Block), "transcribe")
	ctx := startChromium(t, 1280, 800)
	td, audio := monitorDaemon(t, func(c *config.Config) { c.Jobs.MaxActive = 1 })
	base := "http://" + td.d.tcpAddr
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#conn.live"))); err != nil {
		t.Fatalf("load the monitor page: %v", err)
	}
	running := submitOverTCP(t, base, audio)
	waitJS(ctx, t, fmt.Sprintf(`(() => { const r = document.querySelector('tr[data-job="%s"]');
		return !!r && r.querySelector('.state').textContent === "processing" })()`, running.ID))
	queued := submitOverTCP(t, base, audio)
	waitJS(ctx, t, fmt.Sprintf(`(() => { const r = document.querySelector('tr[data-job="%s"]');
		return !!r && r.querySelector('.state').textContent === "pending" && /starts (in|now)/.test(r.querySelector('.eta').textContent) })()`, queued.ID))
	if _, out := td.raw("DELETE", "/v1/jobs/"+running.ID, ""); out == "" {
		t.Error("cancel: empty answer")
	}
}
