package main

import (
	"bufio"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
)

// TestEventsJSONLines: `wsched events --json` prints one compact JSON
// object a line.
func TestEventsJSONLines(t *testing.T) {
	e := newE2E(t)
	e.serve()
	cmd := e.wsched("events", "--json")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := e.client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// The subscription may start after a first request: repeat until an
	// event arrives.
	var first string
	for first == "" {
		l, err := c.Acquire(ctx, api.LeaseRequest{MemoryBytes: GiB})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Release(ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		select {
		case first = <-lines:
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("no event line")
		}
	}
	// One more lease: its two events follow whatever the first was, so two
	// more lines come however the subscription and the loop above met.
	l, err := c.Acquire(ctx, api.LeaseRequest{MemoryBytes: GiB})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Release(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	next := func() string {
		select {
		case line := <-lines:
			return line
		case <-ctx.Done():
			t.Fatal("fewer than three event lines")
			return ""
		}
	}
	for i, line := range []string{first, next(), next()} {
		var ev api.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Type == "" || ev.Lease.ID == "" {
			t.Fatalf("line %d is not one event object: %q (%v)", i, line, err)
		}
	}
}
