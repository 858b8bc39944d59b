package httpapi

import (
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

// keyed is the idempotency keys of lease requests under way, per uid: a
// second request with the same key while the first is undecided is
// answered 409 (retry), so one key never yields two leases.
type keyed struct {
	mu   sync.Mutex
	busy map[keyOf]struct{}
}

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

// leaseByKey finds the granted lease of uid that carries key
// (api.IdempotencyLabel). It walks the published view: O(leases), paid
// only by requests that carry a key.
func leaseByKey(v placement.View, uid int, key string) (placement.Lease, bool) {
	match := func(l placement.Lease) bool {
		return l.Holder.UID == uid && l.Labels[api.IdempotencyLabel] == key
	}
	for _, g := range v.GPUs {
		for _, l := range g.Leases {
			if match(l) {
				return l, true
			}
		}
	}
	for _, l := range v.CPU {
		if match(l) {
			return l, true
		}
	}
	return placement.Lease{}, false
}

// sameKey finds uid's granted lease with key. When there is none it marks
// the key under way and returns the function that ends that (leave);
// leave is nil when the lease was found.
func (s *Server) sameKey(uid int, key string) (placement.Lease, func(), error) {
	leave, ok := s.keys.enter(uid, key)
	if !ok {
		return placement.Lease{}, nil, keyInProgress(key)
	}
	if l, found := leaseByKey(s.eng.View(), uid, key); found {
		leave()
		return l, nil, nil
	}
	return placement.Lease{}, leave, nil
}
