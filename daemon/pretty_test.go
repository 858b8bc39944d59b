package daemon

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wsched/wsched/daemon/api"
)

// TestCompactJSON: answers are one compact JSON document unless the
// request asks for ?pretty.
func TestCompactJSON(t *testing.T) {
	td := startDaemon(t, 1, 24*GiB, nil)
	if _, err := td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: GiB}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path   string
		pretty bool
	}{
		{"/v1/leases", false}, {"/v1/leases?pretty", true}, {"/v1/leases?pretty=1", true},
		{"/v1/gpus", false}, {"/v1/gpus?pretty", true}, {"/v1/nope", false}, {"/v1/nope?pretty", true},
	} {
		_, body := td.raw("GET", tt.path, "")
		if !json.Valid([]byte(body)) {
			t.Fatalf("%s: not JSON: %q", tt.path, body)
		}
		lines := strings.Count(strings.TrimSuffix(body, "\n"), "\n") + 1
		if got := lines > 1; got != tt.pretty {
			t.Errorf("%s: %d lines, want pretty=%v:\n%s", tt.path, lines, tt.pretty, body)
		}
	}
}
