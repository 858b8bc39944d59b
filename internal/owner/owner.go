// Package owner is the mechanics of one goroutine owning mutable state:
// callers hand it closures over a channel and wait until the closure ran,
// their context ended, or the owner stopped. The placement engine and the
// job manager each run one such loop.
package owner

import "context"

// Loop connects callers to the goroutine that owns a state of type S. The
// owner selects on Ops in its loop and calls Stop when it returns.
type Loop[S any] struct {
	ops     chan func(S)
	stopped chan struct{}
	stopErr error
}

// New returns a loop whose Do answers stopErr once the owner has stopped.
func New[S any](stopErr error) *Loop[S] {
	return &Loop[S]{ops: make(chan func(S)), stopped: make(chan struct{}), stopErr: stopErr}
}

// Ops is what the owner receives closures from; it runs each with its state.
func (l *Loop[S]) Ops() <-chan func(S) { return l.ops }

// Stop tells waiting and later callers that the owner is gone. The owner
// calls it once, as its loop returns.
func (l *Loop[S]) Stop() { close(l.stopped) }

// Stopped is closed once the owner has stopped.
func (l *Loop[S]) Stopped() <-chan struct{} { return l.stopped }

// Do runs f on the owner goroutine and waits for it. It returns ctx's error
// when ctx ends before the owner takes f (once taken, f runs to the end),
// and the stop error when the owner stops first.
func (l *Loop[S]) Do(ctx context.Context, f func(S)) error {
	done := make(chan struct{})
	select {
	case l.ops <- func(s S) { f(s); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-l.stopped:
		return l.stopErr
	}
	select {
	case <-done:
		return nil
	case <-l.stopped:
		return l.stopErr
	}
}
