package client

import (
	"context"
	"net/http"

	"github.com/wsched/wsched/daemon/api"
)

// Preview asks where the daemon would place req now (POST
// /v1/placement/preview); nothing is granted or queued.
func (c *Client) Preview(ctx context.Context, req api.LeaseRequest) (api.PlacementPreview, error) {
	var out api.PlacementPreview
	return out, c.do(ctx, http.MethodPost, "/v1/placement/preview", req, &out)
}

// Registry returns the daemon's models with the memory a lease for each
// gets and its fit per GPU (GET /v1/models/registry).
func (c *Client) Registry(ctx context.Context) (api.Registry, error) {
	var out api.Registry
	return out, c.do(ctx, http.MethodGet, "/v1/models/registry", nil, &out)
}
