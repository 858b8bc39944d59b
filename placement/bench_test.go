package placement

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkGrantRelease measures grant+release cycles on 8 simulated GPUs
// through the engine ("engine"), next to the floor of its design: the same
// two round trips to an owner goroutine that does nothing ("floor"). The
// ratio engine/floor is the cost of the decisions themselves. Run with
// -cpu 1,64 for 1 and 64 goroutines (b.RunParallel uses GOMAXPROCS
// goroutines; SetParallelism scales it).
func BenchmarkGrantRelease(b *testing.B) {
	for _, par := range []int{1, 64} {
		b.Run(parName(par)+"/engine", func(b *testing.B) {
			r := newRig(&testing.T{}, gpus(8, 80*GiB))
			defer r.stop()
			runParallel(b, par, func() {
				l, err := r.eng.Acquire(context.Background(), req(GiB))
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := r.eng.Release(context.Background(), l.ID, "bench"); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(parName(par)+"/floor", func(b *testing.B) {
			ops := make(chan func(), 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				for {
					select {
					case f := <-ops:
						f()
					case <-ctx.Done():
						return
					}
				}
			}()
			roundTrip := func() {
				done := make(chan struct{})
				ops <- func() { close(done) }
				<-done
			}
			runParallel(b, par, func() { roundTrip(); roundTrip() })
		})
	}
}

func parName(n int) string {
	if n == 1 {
		return "goroutines=1"
	}
	return "goroutines=64"
}

// runParallel runs f b.N times in total from par goroutines.
func runParallel(b *testing.B, par int, f func()) {
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N / par
	for g := 0; g < par; g++ {
		n := per
		if g == 0 {
			n += b.N % par
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				f()
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
}

// BenchmarkDispatchLatency measures the time from a release to the grant of
// a waiter that now fits (the GPU is full; one waiter queued), and reports
// its p50 and p99.
func BenchmarkDispatchLatency(b *testing.B) {
	r := newRig(&testing.T{}, gpus(1, 24*GiB))
	defer r.stop()
	ctx := context.Background()
	holder := r.acquireB(b, req(24*GiB))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ch := r.acquireAsync(req(24*GiB, wait(time.Minute)))
		for {
			v := r.eng.View()
			if len(v.Queue) == 1 {
				break
			}
		}
		start := time.Now()
		if _, err := r.eng.Release(ctx, holder.ID, "bench"); err != nil {
			b.Fatal(err)
		}
		res := <-ch
		lat = append(lat, time.Since(start))
		if res.err != nil {
			b.Fatal(res.err)
		}
		holder = res.lease
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

func (r *rig) acquireB(b *testing.B, q Request) Lease {
	l, err := r.eng.Acquire(context.Background(), q)
	if err != nil {
		b.Fatal(err)
	}
	return l
}
