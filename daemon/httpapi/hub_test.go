package httpapi

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/wsched/wsched/placement"
)

// feedEngine is an Engine whose event subscription the test feeds.
type feedEngine struct {
	Engine
	subscribes atomic.Int32
	events     chan placement.Event
}

func (f *feedEngine) Subscribe(ctx context.Context, _ ...placement.EventType) (<-chan placement.Event, func(), error) {
	f.subscribes.Add(1)
	return f.events, func() {}, nil
}

func startHub(t *testing.T, perUID int) (*hub, *feedEngine) {
	eng := &feedEngine{events: make(chan placement.Event)}
	h := newHub(eng, perUID)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return h, eng
}

func TestHubOneEngineSubscriptionDropsTheSlow(t *testing.T) {
	h, eng := startHub(t, 0)
	ctx := context.Background()
	var stalled []<-chan placement.Event
	for range 100 {
		ch, cancel, err := h.subscribe(ctx, Peer{UID: 0, Known: true})
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
		stalled = append(stalled, ch)
	}
	reader, cancel, err := h.subscribe(ctx, Peer{UID: 0, Known: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	got := make(chan int)
	go func() {
		n := 0
		for range reader {
			if n++; n == 2*streamBuffer {
				got <- n
			}
		}
	}()
	for i := range 2 * streamBuffer {
		eng.events <- placement.Event{Seq: uint64(i + 1)}
	}
	if n := <-got; n != 2*streamBuffer {
		t.Fatalf("the reading stream got %d events", n)
	}
	if n := eng.subscribes.Load(); n != 1 {
		t.Errorf("101 streams made %d engine subscriptions, want 1", n)
	}
	for i, ch := range stalled {
		n := 0
		for range ch { // closed after its buffer filled
			n++
		}
		if n != streamBuffer {
			t.Fatalf("stalled stream %d: %d events then closed, want %d", i, n, streamBuffer)
		}
	}
}

func TestHubCapsStreamsPerUID(t *testing.T) {
	h, _ := startHub(t, 2)
	ctx := context.Background()
	user := Peer{UID: 1000, PID: 1, Known: true}
	for range 2 {
		_, cancel, err := h.subscribe(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
	}
	_, _, err := h.subscribe(ctx, user)
	var he *httpError
	if !errors.As(err, &he) || he.status != 429 || he.code != "limit_exceeded" {
		t.Fatalf("third stream of uid 1000: %v, want 429 limit_exceeded", err)
	}
	// Another uid, and root, are not affected.
	for _, p := range []Peer{{UID: 1001, Known: true}, {UID: 0, Known: true}, {UID: 0, Known: true}, {UID: 0, Known: true}} {
		_, cancel, err := h.subscribe(ctx, p)
		if err != nil {
			t.Fatalf("uid %d: %v", p.UID, err)
		}
		defer cancel()
	}
	// A cancelled stream frees its place.
	_, cancel, _ := h.subscribe(ctx, Peer{UID: 1002, Known: true})
	cancel()
}
