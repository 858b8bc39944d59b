package httpapi

import (
	"fmt"
	"net/http"
	"os/user"
	"slices"
	"strconv"

	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
)

// limited reports whether [limits] apply to peer: local users other than
// root. Root and TCP clients (who hold the daemon's token) are not limited.
func limited(p Peer) bool { return p.Known && p.UID != 0 }

func limitExceeded(format string, args ...any) error {
	return &httpError{status: http.StatusTooManyRequests, code: "limit_exceeded", err: fmt.Errorf(format, args...)}
}

// mayUseHigh allows priority high to root and members of
// [limits] priority_group.
func (s *Server) mayUseHigh(p Peer) error {
	if p.IsRoot() {
		return nil
	}
	group := s.cfg.Limits.PriorityGroup
	if group != "" && p.Known {
		if g, err := user.LookupGroup(group); err == nil {
			gid, _ := strconv.Atoi(g.Gid)
			if p.GID == gid || slices.Contains(peerGIDs(s.procRoot, p), gid) {
				return nil
			}
		}
	}
	if group == "" {
		return forbidden("priority high is for root only ([limits] priority_group is not set)")
	}
	return forbidden("priority high is for root and members of group %s ([limits] priority_group)", group)
}

// admitLease checks a lease request against what [limits] decide before
// it reaches the engine (priority high, min_lease) and hands the engine the
// per-uid limits, which it checks in the step that queues or grants the
// request: the counting is the engine's, O(1), and concurrent requests
// cannot pass a limit between a check and a grant.
func (s *Server) admitLease(p Peer, req *placement.Request) error {
	if req.Priority >= placement.High {
		if err := s.mayUseHigh(p); err != nil {
			return err
		}
	}
	if !limited(p) {
		return nil
	}
	lim := s.cfg.Limits
	if min := int64(lim.MinLease); req.Device.Kind != device.CPU && req.Bytes < min {
		return badRequest("below_min_lease", "memory_bytes %d is less than [limits] min_lease (%s)", req.Bytes, units.FormatBytes(min))
	}
	req.Limits = placement.Limits{Leases: lim.Leases, Queued: lim.Queued, Bytes: int64(lim.Bytes)}
	return nil
}
