package placement

import (
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
)

func spec(t *testing.T, s string) device.Spec {
	t.Helper()
	d, err := device.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPreview (issue 23, item 1): the preview picks the GPU a grant would
// get — leases and the memory held for a waiting request counted — and
// changes nothing.
func TestPreview(t *testing.T) {
	r := newRig(t, gpus(2, 24*GiB), func(c *rigConfig, _ *Options) { c.Leases.BackfillWindow = 0 })
	r.acquire(req(13*GiB, pin("cuda:1")))
	if p := r.eng.Preview(GiB, spec(t, "auto"), Normal); !p.Fits || p.Account.Index != 0 || p.AvailableBytes != 24*GiB {
		t.Errorf("auto: %+v", p)
	}
	p := r.eng.Preview(12*GiB, spec(t, "cuda:1"), Normal)
	if p.Fits || p.Account.Index != 1 || !strings.Contains(p.Reason, "at most 11.00 GiB available (GPU 1)") {
		t.Errorf("pinned, too large: %+v", p)
	}
	r.acquireAsync(req(16*GiB, pin("cuda:1"), wait(time.Minute)))
	deadline := time.Now().Add(10 * time.Second)
	for len(r.view().Held) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no memory held for the waiting request")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p = r.eng.Preview(GiB, spec(t, "cuda:1"), High)
	if p.Fits || p.HeldBytes != 16*GiB || !strings.Contains(p.Reason, units.FormatBytes(16*GiB)+" more held there for waiting requests") {
		t.Errorf("pinned behind a hold: %+v", p)
	}
	if p := r.eng.Preview(0, spec(t, "cpu"), Normal); !p.Fits || !p.CPU {
		t.Errorf("cpu: %+v", p)
	}
	if p := r.eng.Preview(GiB, spec(t, "cuda:5"), Normal); p.Fits || p.Account.Index != -1 || p.Reason != "no GPU cuda:5 on this machine" {
		t.Errorf("no such GPU: %+v", p)
	}
	if v := r.view(); len(v.Queue) != 1 || len(v.GPUs[1].Leases) != 1 || len(v.GPUs[0].Leases) != 0 {
		t.Errorf("the preview changed something: queue %d, leases %d/%d", len(v.Queue), len(v.GPUs[0].Leases), len(v.GPUs[1].Leases))
	}
}
