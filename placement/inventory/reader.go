package inventory

import (
	"context"
	"sync"
	"time"
)

// Reader hands out snapshots no older than a maximum age: a reading older
// than maxAge is refreshed before it is returned, so placement decisions never
// run on stale data (the seed's 30-second cache). One refresh runs at a time;
// callers that arrive during it share its result.
type Reader struct {
	p      Provider
	maxAge time.Duration
	now    func() time.Time

	mu   sync.Mutex
	last Snapshot
	have bool
}

// NewReader wraps p. now is the clock (time.Now when nil).
func NewReader(p Provider, maxAge time.Duration, now func() time.Time) *Reader {
	if now == nil {
		now = time.Now
	}
	return &Reader{p: p, maxAge: maxAge, now: now}
}

// Provider returns the wrapped provider.
func (r *Reader) Provider() Provider { return r.p }

// Fresh returns the last snapshot if it is at most maxAge old, else a new one.
func (r *Reader) Fresh(ctx context.Context) (Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.have && r.last.Age(r.now()) <= r.maxAge {
		return r.last, nil
	}
	return r.refreshLocked(ctx)
}

// Refresh takes a new snapshot regardless of age.
func (r *Reader) Refresh(ctx context.Context) (Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refreshLocked(ctx)
}

func (r *Reader) refreshLocked(ctx context.Context) (Snapshot, error) {
	s, err := r.p.Snapshot(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	r.last, r.have = s, true
	return s, nil
}
