package daemon

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/testtmp"
)

// BenchmarkKeyedLease (issue 23 item 5): grant+release cycles over the
// Unix socket with an idempotency key (a new one per cycle, as `wsched
// run` and `lease --wait` send) next to the same without, on a daemon
// holding 20k leases (WSCHED_BENCH_LEASES changes it; journal without fsync
// unless WSCHED_BENCH_FSYNC=1); 9 rounds alternate. Reports each one's
// median ns per cycle and keyed/plain (goal: the key costs no walk over
// the leases, ≤ 1.2).
func BenchmarkKeyedLease(b *testing.B) {
	n := 20_000
	if v := os.Getenv("WSCHED_BENCH_LEASES"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	d, socket, stop := benchDaemon(b, testtmp.ShortDir(b))
	defer stop()
	loadLeases(b, d.eng, n)
	c := client.New(socket)
	defer c.Close()
	seq := 0
	cycles := func(per int, keyed bool) float64 {
		start := time.Now()
		for range per {
			req := api.LeaseRequest{MemoryBytes: 1 << 20}
			if keyed {
				seq++
				req.IdempotencyKey = fmt.Sprintf("bench-%d", seq)
			}
			l, err := c.Acquire(context.Background(), req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Release(context.Background(), l.ID); err != nil {
				b.Fatal(err)
			}
		}
		return float64(time.Since(start).Nanoseconds()) / float64(per)
	}
	const rounds = 9
	per := max(100, b.N/rounds)
	var plain, keyed []float64
	b.ResetTimer()
	for range rounds {
		plain = append(plain, cycles(per, false))
		keyed = append(keyed, cycles(per, true))
	}
	b.StopTimer()
	slices.Sort(plain)
	slices.Sort(keyed)
	p, k := plain[len(plain)/2], keyed[len(keyed)/2]
	b.ReportMetric(p, "plain-ns/cycle")
	b.ReportMetric(k, "keyed-ns/cycle")
	b.ReportMetric(k/p, "keyed/plain")
	b.Logf("%d leases: plain %.0f µs/cycle, keyed %.0f µs/cycle, keyed/plain %.2f", n, p/1e3, k/1e3, k/p)
}
