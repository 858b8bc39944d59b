package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// JobsTrace copies GET /v1/jobs/trace — the jobs the caller may see and the
// daemon's recorded lease events, as JSON Lines `wsched sim --trace` reads
// (daemon/api/trace.go) — to w.
func (c *Client) JobsTrace(ctx context.Context, w io.Writer) error {
	ctx, cancel := c.bounded(ctx, 0)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://wsched/v1/jobs/trace", nil)
	if err != nil {
		return fmt.Errorf("GET /v1/jobs/trace: %w", err)
	}
	return c.sendVia(c.hc, req, copyTo{w})
}

// copyTo is an answer copied as it is instead of decoded (sendVia).
type copyTo struct{ w io.Writer }
