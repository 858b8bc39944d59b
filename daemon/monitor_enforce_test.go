package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/wsched/wsched/daemon/api"
)

// The monitor page shows each GPU's enforcement tier and why it was chosen
// (issue 27), as /v1/gpus gives them.
func TestMonitorPageShowsEnforcement(t *testing.T) {
	ctx := startChromium(t, 1280, 800)
	td, _ := monitorDaemon(t)
	status, body := td.raw("GET", "/v1/gpus", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/gpus: %d %s", status, body)
	}
	var gpus struct{ GPUs []api.GPU }
	if err := json.Unmarshal([]byte(body), &gpus); err != nil || len(gpus.GPUs) < 8 {
		t.Fatalf("GET /v1/gpus: %v, %d GPUs", err, len(gpus.GPUs))
	}
	want := gpus.GPUs[3].Enforcement
	if want == nil || !slices.Contains([]string{"nvml-limits", "mps", "preload", "detect"}, want.Tier) || want.Reason == "" {
		t.Fatalf("GPU 3's enforcement on /v1/gpus: %+v", want)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+td.d.tcpAddr+"/"), chromedp.WaitVisible(chromedp.CSS("#conn.live"))); err != nil {
		t.Fatalf("load the monitor page: %v", err)
	}
	reason, _ := json.Marshal(want.Reason)
	shown := fmt.Sprintf(`(() => { const e = document.querySelector('#gpu-3 .enforcement');
		return !!e && e.dataset.tier === %q && e.title === %s && e.textContent.startsWith("enforcement " + %q) &&
			e.querySelector('.reason').textContent.includes(%s) })()`, want.Tier, reason, want.Tier, reason)
	waitJS(ctx, t, shown)
	// A new reading (which carries no tier) redraws the card: the tier stays
	// on every drawing (an observer counts the drawings without it).
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.tierLost = 0;
		new MutationObserver(() => { if (!document.querySelector('#gpu-3 .enforcement')) window.tierLost++; })
			.observe(document.querySelector('#gpus'), { childList: true, subtree: true }); true`)); err != nil {
		t.Fatal(err)
	}
	td.sim.SetLoad(3, 42, 61)
	waitJS(ctx, t, `document.querySelector('#gpu-3').textContent.includes("61°C")`)
	if lost, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.tierLost`)); err != nil || lost != 0 {
		t.Errorf("the tier was missing from %d drawings after a new reading (%v)", lost, err)
	}
	waitJS(ctx, t, shown)
	assertFits(ctx, t, 1280)
}
