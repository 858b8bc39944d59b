package httpapi

import (
	"context"
	"maps"
	"net/http"
	"slices"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/enforce"
	"github.com/wsched/wsched/placement"
)

// Enforcer is each GPU's enforcement tier (*enforce.Enforcer).
type Enforcer interface {
	// Env is what lease l's holder's environment gains for its tier.
	Env(l placement.Lease) map[string]string
	// For is the tier of the GPU with uuid; Choices every GPU's.
	For(uuid string) enforce.Choice
	Choices() map[string]enforce.Choice
}

var _ Enforcer = (*enforce.Enforcer)(nil)

// enforcementOf is the GPU's tier for /v1/gpus (nil without an Enforcer).
func (s *Server) enforcementOf(uuid string) *api.Enforcement {
	if s.enforcer == nil {
		return nil
	}
	c := s.enforcer.For(uuid)
	return &api.Enforcement{Tier: string(c.Tier), Reason: c.Reason}
}

// enforcements is every GPU's tier for /v1/status, by UUID.
func (s *Server) enforcements() []api.GPUEnforcement {
	if s.enforcer == nil {
		return nil
	}
	cs := s.enforcer.Choices()
	out := make([]api.GPUEnforcement, 0, len(cs))
	for _, uuid := range slices.Sorted(maps.Keys(cs)) {
		out = append(out, api.GPUEnforcement{GPUUUID: uuid, Enforcement: api.Enforcement{Tier: string(cs[uuid].Tier), Reason: cs[uuid].Reason}})
	}
	return out
}

// withEnforcement adds the lease's tier variables to its environment.
func (s *Server) withEnforcement(out *api.Lease, l placement.Lease) {
	if s.enforcer == nil || out.Env == nil {
		return
	}
	maps.Copy(out.Env, s.enforcer.Env(l))
}

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
