package httpapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/estimator"
)

// FuzzDecodeRequests feeds arbitrary bodies to the strict decoder for every
// request type: it must never panic, and every failure must be a 4xx API
// error with a code and a message.
func FuzzDecodeRequests(f *testing.F) {
	for _, s := range []string{
		`{"memory_bytes": 4294967296, "device": "cuda:1", "priority": "high", "ttl_seconds": 60, "wait_seconds": 5}`,
		`{"model": "medium", "precision": "f16", "backend": "whisper.cpp", "segment_seconds": 30, "batch_size": 1, "holder": {"pid": 1, "name": "x"}}`,
		`{"memory_bytes": "4GiB"}`, `{"memry": 1}`, `{"labels": {"a": "b"}}`, `{"ttl_seconds": -1e308}`, `[]`, `null`, `{}`, `{"pid": 7}`,
		`{"memory_bytes": 1}{"x": 2}`, `{"memory_bytes": 1e400}`, "\x00", `{"holder": {"pid": "x"}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		targets := []any{&api.LeaseRequest{}, &api.RenewRequest{}, &api.PIDRequest{}, &estimator.Request{}}
		for _, v := range targets {
			for _, optional := range []bool{false, true} {
				err := DecodeJSON(strings.NewReader(body), v, optional)
				if err == nil {
					continue
				}
				var he *httpError
				if !errors.As(err, &he) || he.status < 400 || he.status >= 500 || he.code == "" || he.Error() == "" {
					t.Fatalf("decode %q into %T: %v is not a 4xx API error", body, v, err)
				}
			}
		}
	})
}
