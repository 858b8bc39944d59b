package httpapi

import (
	"context"
	"net/http"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/placement"
)

// postUsage is POST /v1/leases/{id}/usage: the preload tier's report from a
// holder, sent when it refuses an allocation or passes its lease. The
// holder's user (or root) may report; an overrun event follows at once.
func (s *Server) postUsage(w http.ResponseWriter, r *http.Request) {
	var body api.UsageReport
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	if body.PID == 0 {
		body.PID = peerFrom(r.Context()).PID
	}
	u := placement.Usage{PID: body.PID, UsedBytes: body.UsedBytes, PeakBytes: body.PeakBytes, LimitBytes: body.LimitBytes,
		RefusedBytes: body.RefusedBytes, RefusedTotalBytes: body.RefusedTotalBytes}
	s.changeLease(w, r, "usage reported", func(ctx context.Context, id string, may placement.Guard) (placement.Lease, error) {
		return s.eng.ReportUsageAs(ctx, id, u, may)
	})
}
