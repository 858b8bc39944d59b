package placement

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/units"
)

// scaleRig is an engine loaded with live leases and blocked waiters.
type scaleRig struct {
	r      *rig
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newScaleRig starts an engine on g 80 GiB GPUs holding n leases and m
// waiters that do not fit (70 GiB each, with every GPU holding up to 60 GiB of
// leases), so a 1 GiB request still fits. The backfill window and TTLs are
// long enough that nothing changes on its own while it is measured.
func newScaleRig(b *testing.B, n, m, g int) *scaleRig {
	t := &testing.T{}
	r := newRig(t, gpus(g, 80*GiB), func(c *rigConfig, _ *Options) {
		c.Leases.MaxQueue = m + 64
		c.Leases.BackfillWindow = units.Duration(time.Hour)
		c.Leases.Aging = units.Duration(time.Hour)
	})
	ctx := context.Background()
	size := int64(60*GiB) / int64((n+g-1)/g)
	for i := 0; i < n; i++ {
		if _, err := r.eng.Acquire(ctx, req(size, ttl(24*time.Hour))); err != nil {
			b.Fatalf("lease %d: %v", i, err)
		}
	}
	sr := &scaleRig{r: r}
	wctx, cancel := context.WithCancel(ctx)
	sr.cancel = cancel
	for i := 0; i < m; i++ {
		sr.wg.Add(1)
		go func() {
			defer sr.wg.Done()
			_, _ = r.eng.Acquire(wctx, req(70*GiB, wait(time.Hour)))
		}()
	}
	for deadline := time.Now().Add(time.Minute); len(r.eng.View().Queue) < m; {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d waiters queued", len(r.eng.View().Queue), m)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return sr
}

func (sr *scaleRig) stop() {
	sr.cancel()
	sr.wg.Wait()
	sr.r.stop()
}

func (sr *scaleRig) cycle(b *testing.B) {
	ctx := context.Background()
	l, err := sr.r.eng.Acquire(ctx, req(GiB))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sr.r.eng.Release(ctx, l.ID, "bench"); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkScale measures in-process grant+release cycles on an engine
// with 100k live leases, 10k waiters and 512 GPUs ("large") next to one
// with 10 leases, 10 waiters and 8 GPUs ("small"), alternating one cycle
// on each, and reports both and their ratio (goal: ≤ 2). Set
// WSCHED_BENCH_SCALE=N,M,G to change the large one.
func BenchmarkScale(b *testing.B) {
	n, m, g := 100_000, 10_000, 512
	if v := os.Getenv("WSCHED_BENCH_SCALE"); v != "" {
		if _, err := fmt.Sscanf(v, "%d,%d,%d", &n, &m, &g); err != nil {
			b.Fatalf("WSCHED_BENCH_SCALE=%q: want N,M,G", v)
		}
	}
	start := time.Now()
	large := newScaleRig(b, n, m, g)
	defer large.stop()
	b.Logf("large engine (%d leases, %d waiters, %d GPUs) set up in %v", n, m, g, time.Since(start).Round(time.Millisecond))
	small := newScaleRig(b, 10, 10, 8)
	defer small.stop()
	for i := 0; i < 200; i++ { // warm both
		small.cycle(b)
		large.cycle(b)
	}
	var ts, tl time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		small.cycle(b)
		t1 := time.Now()
		large.cycle(b)
		ts, tl = ts+t1.Sub(t0), tl+time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(ts.Nanoseconds())/float64(b.N), "small-ns/cycle")
	b.ReportMetric(float64(tl.Nanoseconds())/float64(b.N), "large-ns/cycle")
	b.ReportMetric(float64(tl)/float64(ts), "large/small")
}
