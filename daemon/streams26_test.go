package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/plugins/plugintest"
)

// TestEightJobsShareOneInstance (issue 26): eight concurrent jobs of a
// model with max_streams = 8 run in one backend process under one lease,
// whose size follows the streams: it grows by one stream per job that
// joins (resized events upward, to at most eight streams' worth) and
// shrinks back to one stream's as they end (streams that join or leave at
// the same moment may share one resize). The fake backend decodes the
// calls in parallel; /v1/backends shows one instance that served several
// streams at once.
func TestEightJobsShareOneInstance(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.SegmentDelay), "150ms") // jobs long enough to overlap
	const stream = 1 * GiB                                     // no estimator profile: a stream costs the configured memory
	td, audio := jobDaemon(t, stream, func(c *config.Config) { c.Models.Entries[0].MaxStreams = 8 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := liveEvents(t, ctx, td)

	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() { ids[i] = td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio)).ID })
	}
	wg.Wait()
	peakStreams := 0
	for _, id := range ids {
		got := td.waitJob(t, id, func(j jobs.Job) bool {
			if b := backendsOf(t, td); len(b.Instances) == 1 {
				peakStreams = max(peakStreams, b.Instances[0].PeakStreams)
			}
			return finished(j)
		})
		if got.State != jobs.Completed {
			t.Fatalf("job %s: %s (%s)", id, got.State, got.Error)
		}
	}

	b := backendsOf(t, td)
	if len(b.Instances) != 1 {
		t.Fatalf("%d backend instances after eight jobs, want one: %+v", len(b.Instances), b.Instances)
	}
	inst := b.Instances[0]
	if inst.MaxStreams != 8 || inst.PeakStreams < 2 || inst.Streams != 0 || inst.MemoryBytes != stream {
		t.Errorf("instance: streams %d (peak %d, max %d), lease %d bytes; want idle at one stream's %d after serving several at once",
			inst.Streams, inst.PeakStreams, inst.MaxStreams, inst.MemoryBytes, int64(stream))
	}
	t.Logf("one instance (pid %d) served up to %d streams at once (%d seen while polling)", inst.PID, inst.PeakStreams, peakStreams)

	grants, sizes := 0, []int64{}
	deadline := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-events:
			if ev.Lease.Holder.Name != "wsched-backend-fake" {
				continue
			}
			switch ev.Type {
			case "granted":
				grants++
				sizes = append(sizes, ev.Lease.MemoryBytes)
			case "resized":
				if ev.Lease.ID != inst.Lease {
					t.Errorf("resized lease %s, want the instance's %s", ev.Lease.ID, inst.Lease)
				}
				sizes = append(sizes, ev.Lease.MemoryBytes)
			}
		case <-time.After(time.Second): // the jobs have ended: the events are all sent
			done = true
		case <-deadline:
			t.Fatal("lease events did not settle")
		}
	}
	if grants != 1 {
		t.Errorf("%d backend leases granted, want one", grants)
	}
	top := int64(0)
	for _, s := range sizes {
		top = max(top, s)
		if s%stream != 0 || s < stream || s > 8*stream {
			t.Errorf("lease sizes %v: want whole streams (%s each), 1 to 8 of them", sizes, units.FormatBytes(stream))
			break
		}
	}
	if top < 2*stream || sizes[len(sizes)-1] != stream {
		t.Errorf("lease sizes %v: want it grown by the streams and back to one stream's", sizes)
	}
	t.Logf("lease sizes (GiB): %v", gibs(sizes))
}

// backendsOf reads /v1/backends.
func backendsOf(t *testing.T, td *testDaemon) api.Backends {
	t.Helper()
	status, out := td.raw("GET", "/v1/backends", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/backends: %d %s", status, out)
	}
	var b api.Backends
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatal(err)
	}
	return b
}

func gibs(xs []int64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x) / float64(GiB)
	}
	return out
}
