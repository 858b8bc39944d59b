package owner

import (
	"context"
	"errors"
	"testing"
)

var errStopped = errors.New("stopped")

type counter struct{ n int }

// run is a minimal owner: it serves closures until ctx ends.
func run(ctx context.Context, l *Loop[*counter], c *counter) {
	defer l.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case o := <-l.Ops():
			o.Run(c)
			o.Finish()
		}
	}
}

func TestDoRunsOnOwner(t *testing.T) {
	l := New[*counter](errStopped)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { run(ctx, l, &counter{}); close(done) }()
	for range 10 {
		if err := l.Do(context.Background(), func(c *counter) { c.n++ }); err != nil {
			t.Fatal(err)
		}
	}
	var got int
	if err := l.Do(context.Background(), func(c *counter) { got = c.n }); err != nil || got != 10 {
		t.Errorf("n = %d, %v", got, err)
	}
	cancel()
	<-done
	if err := l.Do(context.Background(), func(*counter) { t.Error("ran after stop") }); !errors.Is(err, errStopped) {
		t.Errorf("after stop: %v", err)
	}
	select {
	case <-l.Stopped():
	default:
		t.Error("Stopped not closed")
	}
}

func TestDoCancelled(t *testing.T) {
	l := New[*counter](errStopped) // no owner: nothing takes the closure
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Do(ctx, func(*counter) { t.Error("ran without owner") }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestStopWhileRunning: a caller whose closure the owner took but whose
// owner stops before finishing is answered with the stop error.
func TestStopWhileRunning(t *testing.T) {
	l := New[*counter](errStopped)
	release := make(chan struct{})
	go func() {
		<-l.Ops() // taken, never run nor finished
		l.Stop()
		close(release)
	}()
	if err := l.Do(context.Background(), func(*counter) {}); !errors.Is(err, errStopped) {
		t.Errorf("stopped mid-call: %v", err)
	}
	<-release
}

// TestFinishLater: the caller waits for Finish, not for Run.
func TestFinishLater(t *testing.T) {
	l := New[*counter](errStopped)
	c := &counter{}
	ran := make(chan Op[*counter])
	go func() {
		o := <-l.Ops()
		o.Run(c)
		ran <- o
	}()
	returned := make(chan error)
	go func() { returned <- l.Do(context.Background(), func(c *counter) { c.n++ }) }()
	o := <-ran
	select {
	case err := <-returned:
		t.Fatalf("Do returned before Finish: %v", err)
	default:
	}
	o.Finish()
	if err := <-returned; err != nil || c.n != 1 {
		t.Errorf("Do = %v, n = %d", err, c.n)
	}
}
