// Package streamgate admits a backend's concurrent streams: up to a limit
// of Transcribe calls at once, or one exclusive holder (Load, Unload)
// alone, each wait ending with its context (issue 26: streams that share one
// instance).
package streamgate

import (
	"context"
	"sync"
)

// Gate admits up to limit streams (Transcribe calls) at once, or one exclusive holder (Load, Unload) alone. A
// waiting exclusive holder keeps new streams out, so a load is not starved
// by a steady flow of calls. Waits end with their context.
type Gate struct {
	mu       sync.Mutex
	limit    int  // streams admitted at once, at least 1
	streams  int  // streams admitted now
	excl     bool // an exclusive holder is in
	exclWait int  // exclusive holders waiting
	changed  chan struct{}
}

// New returns a Gate admitting limit streams (at least 1).
func New(limit int) *Gate {
	return &Gate{limit: max(limit, 1), changed: make(chan struct{})}
}

// Acquire waits until ctx is done or a stream (exclusive: everything) is
// admitted.
func (g *Gate) Acquire(ctx context.Context, exclusive bool) error {
	g.mu.Lock()
	if exclusive {
		g.exclWait++
	}
	for {
		if g.admit(exclusive) {
			g.mu.Unlock()
			return nil
		}
		changed := g.changed
		g.mu.Unlock()
		select {
		case <-changed:
			g.mu.Lock()
		case <-ctx.Done():
			g.mu.Lock()
			if exclusive {
				g.exclWait--
				g.wake() // streams held back by this waiter may go
			}
			g.mu.Unlock()
			return ctx.Err()
		}
	}
}

// admit takes a place when there is one; the caller holds mu.
func (g *Gate) admit(exclusive bool) bool {
	switch {
	case g.excl:
		return false
	case exclusive && g.streams == 0:
		g.excl, g.exclWait = true, g.exclWait-1
		return true
	case !exclusive && g.exclWait == 0 && g.streams < g.limit:
		g.streams++
		return true
	}
	return false
}

// Release gives back what Acquire admitted.
func (g *Gate) Release(exclusive bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if exclusive {
		g.excl = false
	} else {
		g.streams--
	}
	g.wake()
}

// SetLimit changes how many streams are admitted at once; the caller holds
// the gate exclusively.
func (g *Gate) SetLimit(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.limit = max(n, 1)
}

// InFlight is the number of streams admitted now.
func (g *Gate) InFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.streams
}

// wake tells every waiter to look again; the caller holds mu.
func (g *Gate) wake() {
	close(g.changed)
	g.changed = make(chan struct{})
}
