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
	waitJS(ctx, t, fmt.Sprintf(`(() => { const e = document.querySelector('#gpu-3 .enforcement');
		return !!e && e.dataset.tier === %q && e.title === %s && e.textContent.startsWith("enforcement " + %q) &&
			e.querySelector('.reason').textContent.includes(%s) })()`, want.Tier, reason, want.Tier, reason))
	assertFits(ctx, t, 1280)
}
