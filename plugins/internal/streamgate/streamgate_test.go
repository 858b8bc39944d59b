package streamgate

import (
	"context"
	"errors"
	"testing"
	"time"
)

// bound limits every wait of these tests.
const bound = time.Minute

// acquireAsync starts Acquire and returns where its result arrives.
func acquireAsync(ctx context.Context, g *Gate, exclusive bool) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- g.Acquire(ctx, exclusive) }()
	return ch
}

func wantAdmitted(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(bound):
		t.Fatalf("%s: not admitted", what)
	}
}

// wantWaiting checks that ch has no result, then ends the wait with cancel
// and expects context.Canceled.
func wantWaiting(t *testing.T, ch <-chan error, cancel context.CancelFunc, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s: admitted (%v); want it waiting", what, err)
	default:
	}
	cancel()
	select {
	case err := <-ch:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: %v; want context.Canceled", what, err)
		}
	case <-time.After(bound):
		t.Fatalf("%s: cancel did not end the wait", what)
	}
}

// waitExclusiveWaiting waits until an exclusive holder waits in g.
func waitExclusiveWaiting(t *testing.T, g *Gate) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		g.mu.Lock()
		n := g.exclWait
		g.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no exclusive waiter")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGate: limit streams at once; an exclusive holder waits for them and
// keeps new streams out while it waits and holds; SetLimit widens.
func TestGate(t *testing.T) {
	ctx := t.Context()
	g := New(2)
	wantAdmitted(t, acquireAsync(ctx, g, false), "stream 1")
	wantAdmitted(t, acquireAsync(ctx, g, false), "stream 2")
	if n := g.InFlight(); n != 2 {
		t.Fatalf("in flight %d, want 2", n)
	}
	c3, cancel3 := context.WithCancel(ctx)
	wantWaiting(t, acquireAsync(c3, g, false), cancel3, "stream 3 over the limit")

	excl := acquireAsync(ctx, g, true) // waits for the two streams
	waitExclusiveWaiting(t, g)
	c4, cancel4 := context.WithCancel(ctx)
	s4 := acquireAsync(c4, g, false)
	g.Release(false)
	g.Release(false)
	wantAdmitted(t, excl, "exclusive after the streams ended")
	wantWaiting(t, s4, cancel4, "a stream behind a waiting exclusive holder")
	g.SetLimit(3)
	g.Release(true)
	for i := range 3 {
		wantAdmitted(t, acquireAsync(ctx, g, false), "stream under the new limit "+string(rune('1'+i)))
	}
}

// TestGateExclusiveCancel: an exclusive waiter that gives up lets the
// streams it held back in.
func TestGateExclusiveCancel(t *testing.T) {
	ctx := t.Context()
	g := New(1)
	wantAdmitted(t, acquireAsync(ctx, g, false), "stream")
	ce, cancelE := context.WithCancel(ctx)
	excl := acquireAsync(ce, g, true)
	waitExclusiveWaiting(t, g)
	s2 := acquireAsync(ctx, g, false)
	g.Release(false)
	// Either the exclusive waiter or the stream may win the race with the
	// cancel below; whichever got in, the other must follow.
	cancelE()
	select {
	case err := <-excl:
		if err == nil {
			g.Release(true)
		}
	case <-time.After(bound):
		t.Fatal("the exclusive waiter did not return")
	}
	wantAdmitted(t, s2, "the stream held back by the cancelled exclusive waiter")
}
