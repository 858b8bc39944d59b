package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"unicode"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/placement"
)

// maxIdempotencyKey bounds idempotency_key (it is stored as a label).
const maxIdempotencyKey = 128

// checkIdempotencyKey refuses keys that are too long or not printable.
func checkIdempotencyKey(k string) error {
	if len(k) > maxIdempotencyKey {
		return badRequest("invalid_field", "field idempotency_key: %d bytes: want at most %d", len(k), maxIdempotencyKey)
	}
	for _, r := range k {
		if !unicode.IsPrint(r) || r == ' ' {
			return badRequest("invalid_field", "field idempotency_key: %q: want printable characters without spaces", k)
		}
	}
	return nil
}

// keyed is the idempotency keys of lease requests under way, per uid — a
// second request with the same key while the first is undecided is
// answered 409 (retry), so one key never yields two leases — and an index
// from key to the lease granted for it. The index is built from the view
// once (the keys of leases restored at start-up are in their labels), kept
// up to date on each keyed grant, checked against the engine on each use,
// and rebuilt when it holds more than twice as many keys as there are
// leases (ended leases leave theirs behind).
type keyed struct {
	mu     sync.Mutex
	busy   map[keyOf]struct{}
	leases map[keyOf]string // lease ID; nil until built
}

// minIndex is the index size below which it is never rebuilt.
const minIndex = 1024

type keyOf struct {
	uid int
	key string
}

// enter marks (uid, key) under way; it returns the function that unmarks
// it, or false when a request with that key is under way already.
func (k *keyed) enter(uid int, key string) (func(), bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.busy == nil {
		k.busy = map[keyOf]struct{}{}
	}
	id := keyOf{uid, key}
	if _, ok := k.busy[id]; ok {
		return nil, false
	}
	k.busy[id] = struct{}{}
	return sync.OnceFunc(func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		delete(k.busy, id)
	}), true
}

// keyInProgress is the answer to a request whose key is under way.
func keyInProgress(key string) error {
	return &httpError{status: http.StatusConflict, code: "idempotency_in_progress",
		err: fmt.Errorf("a lease request with idempotency_key %q is still being decided; retry shortly", key)}
}

// indexKeys lists the idempotency keys of the view's granted leases.
func indexKeys(v placement.View) map[keyOf]string {
	out := map[keyOf]string{}
	add := func(l placement.Lease) {
		if key, ok := l.Labels[api.IdempotencyLabel]; ok {
			out[keyOf{l.Holder.UID, key}] = l.ID
		}
	}
	for _, g := range v.GPUs {
		for _, l := range g.Leases {
			add(l)
		}
	}
	for _, l := range v.CPU {
		add(l)
	}
	return out
}

// lookup is the lease ID indexed for (uid, key), building or rebuilding
// the index from the engine's view when it is missing or stale.
func (k *keyed) lookup(eng Engine, uid int, key string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.leases == nil || (len(k.leases) > minIndex && len(k.leases) > 2*eng.Summary().Leases) {
		k.leases = indexKeys(eng.View())
	}
	id, ok := k.leases[keyOf{uid, key}]
	return id, ok
}

// remember indexes the lease granted for (uid, key); forget drops a stale
// entry.
func (k *keyed) remember(uid int, key, id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.leases != nil {
		k.leases[keyOf{uid, key}] = id
	}
}

func (k *keyed) forget(uid int, key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.leases, keyOf{uid, key})
}

// sameKey finds uid's granted lease with key. When there is none it marks
// the key under way and returns the function that ends that (leave);
// leave is nil when the lease was found.
func (s *Server) sameKey(ctx context.Context, uid int, key string) (placement.Lease, func(), error) {
	leave, ok := s.keys.enter(uid, key)
	if !ok {
		return placement.Lease{}, nil, keyInProgress(key)
	}
	if id, ok := s.keys.lookup(s.eng, uid, key); ok {
		l, err := s.eng.Get(ctx, id)
		if err == nil && l.State == placement.StateGranted && l.Holder.UID == uid && l.Labels[api.IdempotencyLabel] == key {
			leave()
			return l, nil, nil
		}
		s.keys.forget(uid, key) // ended: the key may be granted again
	}
	return placement.Lease{}, leave, nil
}
