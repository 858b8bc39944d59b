package httpapi

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	h := newHub(eng, perUID, perUID)
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
	// The reader acknowledges every event. The feeder never runs more than
	// half a buffer ahead of it: the hub drops any stream whose buffer is
	// full, the reading one too, so a reader the scheduler starves (-race,
	// 2 cores) must not be what the test measures. (Feeding 2*streamBuffer
	// at once made the reader lag and be dropped in 2 of 20 runs; the test
	// then waited forever for an event count that could not come.)
	acks := make(chan int, 2*streamBuffer)
	go func() {
		defer close(acks)
		n := 0
		for range reader {
			n++
			acks <- n
		}
	}()
	const total, ahead = 2 * streamBuffer, streamBuffer / 2
	read := 0
	for i := range total {
		if i-read >= ahead {
			read = waitAck(t, acks, read)
		}
		select {
		case eng.events <- placement.Event{Seq: uint64(i + 1)}:
		case <-time.After(10 * time.Second):
			t.Fatalf("the hub took no event %d for 10 s", i+1)
		}
	}
	for read < total {
		read = waitAck(t, acks, read)
	}
	if n := eng.subscribes.Load(); n != 1 {
		t.Errorf("101 streams made %d engine subscriptions, want 1", n)
	}
	for i, ch := range stalled {
		n := drain(t, ch) // closed after its buffer filled
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
	// The TCP token's bearer (no credentials) is one user too.
	for range 2 {
		_, cancel, err := h.subscribe(ctx, Peer{})
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
	}
	if _, _, err := h.subscribe(ctx, Peer{}); err == nil || !strings.Contains(err.Error(), "the TCP token has 2 event streams open") {
		t.Fatalf("third stream of the TCP token: %v, want limit_exceeded", err)
	}
	// A cancelled stream frees its place.
	_, cancel, _ := h.subscribe(ctx, Peer{UID: 1002, Known: true})
	cancel()
}

// waitAck waits up to 10 s for the reader's next acknowledgement after
// read; the reader's channel closing early (it was dropped) fails the test.
func waitAck(t *testing.T, acks <-chan int, read int) int {
	t.Helper()
	select {
	case n, ok := <-acks:
		if !ok {
			t.Fatalf("the reading stream was dropped after %d events", read)
		}
		return n
	case <-time.After(10 * time.Second):
		t.Fatalf("the reading stream got no event after %d for 10 s", read)
	}
	return read
}

// drain counts what a stream delivers until it is closed, within 10 s.
func drain(t *testing.T, ch <-chan placement.Event) int {
	t.Helper()
	n := 0
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return n
			}
			n++
		case <-deadline:
			t.Fatalf("stream still open after %d events and 10 s", n)
		}
	}
}
