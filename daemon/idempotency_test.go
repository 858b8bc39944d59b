package daemon

import (
	"context"
	"fmt"
	"testing"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/config"
)

// relIdempotentRetry (issue 25 item 13, issue 23 item 5): a lease request
// retried with its idempotency key after each of 10 daemon restarts on the
// same state is answered with the lease granted the first time; the figure
// is the leases the daemon holds afterwards. A row for the reliability
// table: rec.single("retry with idempotency key", "leases after 10
// restarts and retries", "issue: a retry is a new grant", relIdempotentRetry).
func relIdempotentRetry(t *testing.T) (string, bool) {
	var cfg *config.Config
	req := api.LeaseRequest{MemoryBytes: 4 * GiB, TTLSeconds: 3600, IdempotencyKey: "rel-retry-1"}
	first := ""
	for i := range 11 {
		var td *testDaemon
		if cfg == nil {
			td = startDaemon(t, 1, 24*GiB, nil)
			cfg = td.cfg
		} else {
			td = runDaemon(t, cfg)
		}
		l, err := td.c.Acquire(context.Background(), req)
		if err != nil {
			return fmt.Sprintf("retry %d: %v", i, err), false
		}
		if first == "" {
			first = l.ID
		} else if l.ID != first {
			return fmt.Sprintf("retry %d granted %s, not %s", i, l.ID, first), false
		}
		if i < 10 {
			td.stop()
			continue
		}
		ls, err := td.c.Leases(context.Background())
		if err != nil {
			return err.Error(), false
		}
		return fmt.Sprintf("%d lease (%s), 10 retries answered with it", len(ls), first), len(ls) == 1
	}
	return "unreachable", false
}

func TestIdempotentRetryAfterRestart(t *testing.T) {
	if fig, ok := relIdempotentRetry(t); !ok {
		t.Fatal(fig)
	}
}

// TestIdempotentKeyAfterRelease: a key whose lease ended gets a new lease;
// a retry with it then answers the new one.
func TestIdempotentKeyAfterRelease(t *testing.T) {
	td := startDaemon(t, 1, 24*GiB, nil)
	ctx := context.Background()
	req := api.LeaseRequest{MemoryBytes: GiB, IdempotencyKey: "k"}
	first, err := td.c.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := td.c.Release(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	second, err := td.c.Acquire(ctx, req)
	if err != nil || second.ID == first.ID {
		t.Fatalf("after the release: %+v %v", second, err)
	}
	again, err := td.c.Acquire(ctx, req)
	if err != nil || again.ID != second.ID {
		t.Fatalf("retry: %s %v, want %s", again.ID, err, second.ID)
	}
	other := req
	other.IdempotencyKey = "k2"
	if l, err := td.c.Acquire(ctx, other); err != nil || l.ID == second.ID {
		t.Fatalf("another key: %+v %v", l, err)
	}
}
