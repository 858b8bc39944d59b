package daemon

import (
	"context"
	"strings"
	"testing"

	"github.com/wsched/wsched/daemon/api"
)

// TestEstimateConcurrencyAPI: POST /v1/estimate with concurrency answers the
// total for that many streams in one instance, with the shared and
// per-stream parts (issue 26).
func TestEstimateConcurrencyAPI(t *testing.T) {
	td := startDaemon(t, 1, 24*GiB, nil)
	ctx := context.Background()
	one, err := td.c.Estimate(ctx, api.EstimateRequest{Backend: "whisper.cpp", Model: "large-v3", BestOf: 5})
	if err != nil {
		t.Fatal(err)
	}
	ten, err := td.c.Estimate(ctx, api.EstimateRequest{Backend: "whisper.cpp", Model: "large-v3", BestOf: 5, Concurrency: 10})
	if err != nil {
		t.Fatal(err)
	}
	s := ten.Streams
	if s == nil || one.Streams == nil || s.Concurrency != 10 || one.Streams.Concurrency != 1 {
		t.Fatalf("streams: one %+v, ten %+v", one.Streams, s)
	}
	if ten.TotalBytes != s.SharedBytes+10*s.PerStreamBytes || ten.TotalBytes != one.TotalBytes+9*s.PerStreamBytes {
		t.Errorf("ten streams %d, one %d, shared %d, per stream %d", ten.TotalBytes, one.TotalBytes, s.SharedBytes, s.PerStreamBytes)
	}
	if float64(s.ProcessPerJobBytes)/float64(s.TotalBytes) < 3 {
		t.Errorf("ten large streams only %.2f× denser than ten processes", float64(s.ProcessPerJobBytes)/float64(s.TotalBytes))
	}
	status, body := td.raw("POST", "/v1/estimate", `{"model": "tiny", "concurrency": 5000}`)
	if status != 400 {
		t.Errorf("concurrency 5000: %d %s", status, body)
	}
}

// TestEstimateConcurrencyOutOfRange: POST /v1/estimate refuses a
// concurrency below 0 or above max_streams' limit (256) naming the field
// alone, and answers 256.
func TestEstimateConcurrencyOutOfRange(t *testing.T) {
	td := startDaemon(t, 1, 24*GiB, nil)
	for _, tc := range []struct {
		conc   string
		status int
		want   string
	}{
		{"-1", 400, `concurrency -1: want 1 to 256`},
		{"257", 400, `concurrency 257: want 1 to 256`},
		{"256", 200, `"concurrency":256`},
	} {
		status, body := td.raw("POST", "/v1/estimate", `{"model": "tiny", "concurrency": `+tc.conc+`}`)
		if status != tc.status || !strings.Contains(body, tc.want) || tc.status == 400 && strings.Contains(body, "beam") {
			t.Errorf("concurrency %s: %d %s; want %d naming %q", tc.conc, status, body, tc.status, tc.want)
		}
	}
}
