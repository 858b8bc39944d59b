package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wsched/wsched/daemon/api"
)

// Monitor follows GET /v1/monitor/events (what the monitor page and `wsched
// top` show), calling f with each frame until ctx ends, f returns an error,
// or the stream ends; ErrLagged when the daemon dropped a slow reader.
func (c *Client) Monitor(ctx context.Context, f func(api.MonitorFrame) error) error {
	return c.stream(ctx, "/v1/monitor/events", func(event, data string) error {
		var fr api.MonitorFrame
		var v any
		switch event {
		case "lagged":
			return ErrLagged
		case "snapshot":
			fr.Snapshot = &api.MonitorSnapshot{}
			v = fr.Snapshot
		case "placement":
			fr.Placement = &api.MonitorPlacement{}
			v = fr.Placement
		case "gpus":
			fr.GPUs = &api.GPUs{}
			v = fr.GPUs
		case "job":
			fr.Job = &api.JobEvent{}
			v = fr.Job
		default:
			return nil // a frame type this client does not know
		}
		if err := json.Unmarshal([]byte(data), v); err != nil {
			return fmt.Errorf("decode %s frame: %w", event, err)
		}
		return f(fr)
	})
}
