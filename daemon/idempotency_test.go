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
