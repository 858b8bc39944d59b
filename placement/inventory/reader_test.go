package inventory

import (
	"context"
	"testing"
	"time"
)

type countingProvider struct {
	None
	calls int
	now   *time.Time
}

func (c *countingProvider) Snapshot(context.Context) (Snapshot, error) {
	c.calls++
	return Snapshot{Taken: *c.now, Provider: "count"}, nil
}

func TestReaderMaxAge(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cp := &countingProvider{now: &now}
	r := NewReader(cp, 500*time.Millisecond, func() time.Time { return now })
	ctx := context.Background()
	steps := []struct {
		advance time.Duration
		calls   int
	}{{0, 1}, {100 * time.Millisecond, 1}, {400 * time.Millisecond, 1}, {time.Millisecond, 2}, {0, 2}}
	for i, s := range steps {
		now = now.Add(s.advance)
		snap, err := r.Fresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cp.calls != s.calls {
			t.Errorf("step %d: %d provider reads, want %d", i, cp.calls, s.calls)
		}
		if age := snap.Age(now); age > 500*time.Millisecond {
			t.Errorf("step %d: Fresh returned a %v old snapshot", i, age)
		}
	}
	if _, err := r.Refresh(ctx); err != nil || cp.calls != 3 {
		t.Errorf("Refresh: calls %d, %v", cp.calls, err)
	}
}
