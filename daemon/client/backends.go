package client

import (
	"context"
	"net/http"

	"github.com/wsched/wsched/daemon/api"
)

// Backends returns GET /v1/backends: discovered backends, refused files and
// warm instances.
func (c *Client) Backends(ctx context.Context) (api.Backends, error) {
	var out api.Backends
	return out, c.do(ctx, http.MethodGet, "/v1/backends", nil, &out)
}
