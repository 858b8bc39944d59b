// Package owner is the mechanics of one goroutine owning mutable state:
// callers hand it closures over a channel and wait until the owner has run
// and finished them, their context ended, or the owner stopped. The
// placement engine and the job manager each run one such loop.
package owner

import "context"

// Loop connects callers to the goroutine that owns a state of type S. The
// owner selects on Ops in its loop and calls Stop when it returns.
type Loop[S any] struct {
	ops     chan Op[S]
	stopped chan struct{}
	stopErr error
}

// Op is one caller's closure. The owner calls Run with its state, then
// Finish to release the caller: at once, or later (once what Run changed is
// published, say).
type Op[S any] struct {
	f    func(S)
	done chan struct{}
}

// Run runs the caller's closure on s.
func (o Op[S]) Run(s S) { o.f(s) }

// Finish releases the caller waiting in Do. Call it once per Op.
func (o Op[S]) Finish() { close(o.done) }

// New returns a loop whose Do answers stopErr once the owner has stopped.
func New[S any](stopErr error) *Loop[S] {
	return &Loop[S]{ops: make(chan Op[S]), stopped: make(chan struct{}), stopErr: stopErr}
}

// Ops is what the owner receives closures from.
func (l *Loop[S]) Ops() <-chan Op[S] { return l.ops }

// Stop tells waiting and later callers that the owner is gone. The owner
// calls it once, as its loop returns.
func (l *Loop[S]) Stop() { close(l.stopped) }

// Stopped is closed once the owner has stopped.
func (l *Loop[S]) Stopped() <-chan struct{} { return l.stopped }

// Do hands f to the owner and waits until the owner finished it. It
// returns ctx's error when ctx ends before the owner takes f (once taken, f
// runs to the end), and the stop error when the owner stops first.
func (l *Loop[S]) Do(ctx context.Context, f func(S)) error {
	done := make(chan struct{})
	select {
	case l.ops <- Op[S]{f: f, done: done}:
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
