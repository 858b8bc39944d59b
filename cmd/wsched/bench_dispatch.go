package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/units"
)

// dispatchLatency measures, over the socket, the time from a release to
// the grant of the request waiting for its memory: pairs holder/waiter run
// concurrently, each pinned to a GPU of its own and sized to what is
// available there, so one pair's release can only let its own waiter in.
// Each pair does iters hand-overs.
func dispatchLatency(ctx context.Context, c *client.Client, pairs, iters int) ([]time.Duration, error) {
	gpus, err := c.GPUs(ctx)
	if err != nil {
		return nil, err
	}
	if len(gpus.GPUs) < pairs {
		return nil, fmt.Errorf("--dispatch with -c %d needs %d GPUs, the daemon has %d", pairs, pairs, len(gpus.GPUs))
	}
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for k := 0; k < pairs; k++ {
		g := gpus.GPUs[k]
		wg.Go(func() {
			got, err := handOvers(ctx, c, g.Index, g.Accounting.AvailableBytes, iters)
			mu.Lock()
			defer mu.Unlock()
			lat, firstErr = append(lat, got...), cmpErr(firstErr, err)
		})
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, firstErr
}

func handOvers(ctx context.Context, c *client.Client, index int, size int64, iters int) ([]time.Duration, error) {
	if size < units.GiB {
		return nil, fmt.Errorf("GPU %d has %s available: too little to measure dispatch on", index, units.FormatBytes(size))
	}
	req := api.LeaseRequest{MemoryBytes: size, Device: fmt.Sprintf("cuda:%d", index), TTLSeconds: 600}
	holder, err := c.Acquire(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("dispatch holder on GPU %d: %w", index, err)
	}
	var lat []time.Duration
	for i := 0; i < iters; i++ {
		type res struct {
			l   api.Lease
			err error
		}
		ch := make(chan res, 1)
		go func() {
			w := req
			w.WaitSeconds = 60
			l, err := c.Acquire(ctx, w)
			ch <- res{l, err}
		}()
		time.Sleep(10 * time.Millisecond) // let it queue
		start := time.Now()
		if _, err := c.Release(ctx, holder.ID); err != nil {
			return lat, err
		}
		r := <-ch
		if r.err != nil {
			return lat, fmt.Errorf("dispatch waiter on GPU %d: %w", index, r.err)
		}
		lat = append(lat, time.Since(start))
		holder = r.l
	}
	_, err = c.Release(ctx, holder.ID)
	return lat, err
}
