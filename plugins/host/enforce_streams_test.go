package host

import (
	"sync"
	"testing"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/placement"
)

// TestEnforceCapCoversStreams (issues 26 × 27): the enforcement tier's cap
// is composed once, when the backend starts, so an instance that takes
// several streams is capped at the most its lease may grow to (2 GiB +
// 3 × 512 MiB for four streams), not at the first stream's 2 GiB, which
// the preload cap would enforce on the second stream's memory; an instance
// of one stream is capped at its lease.
func TestEnforceCapCoversStreams(t *testing.T) {
	var mu sync.Mutex
	var capped []int64
	r := newRig(t, []int64{24 * GiB}, func(_ *config.Backends, o *Options) {
		o.Enforce = func(l placement.Lease) map[string]string {
			mu.Lock()
			defer mu.Unlock()
			capped = append(capped, l.Bytes)
			return nil
		}
	})
	_, release := r.acquire(r.streamSpec("shared.bin", 4))
	release()
	_, release = r.acquire(r.spec("single.bin", 1*GiB))
	release()
	mu.Lock()
	defer mu.Unlock()
	if want := []int64{2*GiB + 3*512*MiB, 1 * GiB}; len(capped) != 2 || capped[0] != want[0] || capped[1] != want[1] {
		t.Errorf("enforcement composed for leases of %v bytes, want %v", capped, want)
	}
}
