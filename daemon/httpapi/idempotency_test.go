package httpapi

import (
	"strings"
	"testing"
)

// TestKeyedOneAtATime: a key under way refuses a second request with the
// same key and uid until the first ends; other uids and keys are free.
func TestKeyedOneAtATime(t *testing.T) {
	var k keyed
	leave, ok := k.enter(1000, "a")
	if !ok {
		t.Fatal("first enter refused")
	}
	if _, ok := k.enter(1000, "a"); ok {
		t.Error("the same key entered twice")
	}
	if l, ok := k.enter(1001, "a"); !ok {
		t.Error("another uid's key refused")
	} else {
		l()
	}
	leave()
	leave() // idempotent
	if l, ok := k.enter(1000, "a"); !ok {
		t.Error("a key that left is still busy")
	} else {
		l()
	}
	if len(k.busy) != 0 {
		t.Errorf("%d keys left busy", len(k.busy))
	}
}

func TestCheckIdempotencyKey(t *testing.T) {
	for key, want := range map[string]string{
		"cli-ABC123":             "",
		strings.Repeat("x", 128): "",
		strings.Repeat("x", 129): "at most 128",
		"two words":              "printable characters without spaces",
		"tab\there":              "printable characters without spaces",
	} {
		err := checkIdempotencyKey(key)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", key, err, want)
		}
	}
}
