package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"os/user"
	"slices"
	"strconv"
	"sync"

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

// inflight counts the lease requests of each uid between admission and
// the engine's answer: a request waiting in the queue stays counted.
type inflight struct {
	mu    sync.Mutex
	byUID map[int]int
}

// enter counts a request of uid unless that would pass max (0: no limit);
// it returns the function that uncounts it.
func (f *inflight) enter(uid, max int) (func(), bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byUID == nil {
		f.byUID = map[int]int{}
	}
	if max > 0 && f.byUID[uid] >= max {
		return nil, false
	}
	f.byUID[uid]++
	return sync.OnceFunc(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.byUID[uid]--; f.byUID[uid] <= 0 {
			delete(f.byUID, uid)
		}
	}), true
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

// admitLease checks a lease request against [limits] before it reaches the
// engine; the returned function ends its count when the engine answered.
func (s *Server) admitLease(p Peer, req placement.Request) (func(), error) {
	if req.Priority >= placement.High {
		if err := s.mayUseHigh(p); err != nil {
			return nil, err
		}
	}
	if !limited(p) {
		return func() {}, nil
	}
	lim := s.cfg.Limits
	if min := int64(lim.MinLease); req.Device.Kind != device.CPU && req.Bytes < min {
		return nil, badRequest("below_min_lease", "memory_bytes %d is less than [limits] min_lease (%s)", req.Bytes, units.FormatBytes(min))
	}
	done, ok := s.pending.enter(p.UID, lim.Queued)
	if !ok {
		return nil, limitExceeded("uid %d has %d lease requests waiting: [limits] queued", p.UID, lim.Queued)
	}
	if lim.Leases > 0 {
		if n := s.leasesOf(p.UID); n >= lim.Leases {
			done()
			return nil, limitExceeded("uid %d holds %d leases: [limits] leases is %d", p.UID, n, lim.Leases)
		}
	}
	return done, nil
}

// leasesOf counts the granted leases of uid in the engine's latest view.
func (s *Server) leasesOf(uid int) int {
	v := s.eng.View()
	n := 0
	count := func(ls []placement.Lease) {
		for _, l := range ls {
			if l.Holder.UID == uid {
				n++
			}
		}
	}
	for _, g := range v.GPUs {
		count(g.Leases)
	}
	count(v.CPU)
	return n
}

// admitJob checks a job submission against [limits] active_jobs and
// stored_jobs before its audio is read.
func (s *Server) admitJob(ctx context.Context, p Peer) error {
	lim := s.cfg.Limits
	if !limited(p) || (lim.ActiveJobs == 0 && lim.StoredJobs == 0) {
		return nil
	}
	all, err := s.jobs.List(ctx)
	if err != nil {
		return err
	}
	var active, stored int
	for _, j := range all {
		if j.Spec.Owner.UID == p.UID {
			stored++
			if !j.State.Finished() {
				active++
			}
		}
	}
	switch {
	case lim.ActiveJobs > 0 && active >= lim.ActiveJobs:
		return limitExceeded("uid %d has %d unfinished jobs: [limits] active_jobs is %d", p.UID, active, lim.ActiveJobs)
	case lim.StoredJobs > 0 && stored >= lim.StoredJobs:
		return limitExceeded("uid %d has %d stored jobs: [limits] stored_jobs is %d; delete finished ones or wait for [jobs] result_ttl", p.UID, stored, lim.StoredJobs)
	}
	return nil
}
