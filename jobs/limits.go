package jobs

import (
	"fmt"
	"math"
)

// TokenUID is the owner uid of jobs submitted with the TCP listener's
// bearer token (the daemon does not know who holds it).
const TokenUID = -1

// OwnerLimits bounds one owner's jobs; 0 means no limit.
type OwnerLimits struct {
	// Active bounds the owner's unfinished jobs.
	Active int
	// Stored bounds the owner's jobs kept, finished ones included.
	Stored int
}

// limitsFor returns the limits of owner uid and the words that name it in
// errors: root is not limited.
func (c Config) limitsFor(uid int) (OwnerLimits, string, string) {
	switch uid {
	case 0:
		return OwnerLimits{}, "root", ""
	case TokenUID:
		return c.TokenLimits, "the TCP token", "token_"
	}
	return c.UIDLimits, fmt.Sprintf("uid %d", uid), ""
}

// admit checks a new job of uid against the table's size and the owner's
// limits, in the owner loop: atomic with the submission that follows.
func (s *mstate) admit(uid int) error {
	if len(s.jobs) >= s.m.cfg.MaxJobs {
		return fmt.Errorf("%w: %d jobs are kept ([jobs] max_jobs); delete finished ones (DELETE /v1/jobs/ID) or wait for [jobs] result_ttl",
			ErrQueueFull, s.m.cfg.MaxJobs)
	}
	lim, who, prefix := s.m.cfg.limitsFor(uid)
	c := s.owners[uid]
	if c == nil {
		return nil
	}
	switch {
	case lim.Active > 0 && c.active >= lim.Active:
		return fmt.Errorf("%w: %s has %d unfinished jobs: [limits] %sactive_jobs is %d", ErrLimit, who, c.active, prefix, lim.Active)
	case lim.Stored > 0 && c.stored >= lim.Stored:
		return fmt.Errorf("%w: %s has %d stored jobs: [limits] %sstored_jobs is %d; delete finished ones (DELETE /v1/jobs/ID) or wait for [jobs] result_ttl",
			ErrLimit, who, c.stored, prefix, lim.Stored)
	}
	return nil
}

// add puts e in the table and counts it for its owner.
func (s *mstate) add(e *entry) {
	s.jobs[e.job.ID] = e
	s.count(e.job.Spec.Owner.UID, 1, !e.job.State.Finished())
}

// drop removes e from the table and its owner's counts.
func (s *mstate) drop(e *entry) {
	delete(s.jobs, e.job.ID)
	s.count(e.job.Spec.Owner.UID, -1, !e.job.State.Finished())
}

// count adds d to uid's stored jobs, and to its active ones when active.
func (s *mstate) count(uid, d int, active bool) {
	c := s.owners[uid]
	if c == nil {
		c = &ownerCount{}
		s.owners[uid] = c
	}
	c.stored += d
	if active {
		c.active += d
	}
	if c.stored <= 0 {
		delete(s.owners, uid)
	}
}

// delete removes a finished job from the table and the store.
func (s *mstate) delete(e *entry) error {
	if s.m.store != nil {
		if err := s.m.store.DeleteJob(e.job.ID); err != nil {
			return fmt.Errorf("delete job %s: %w", e.job.ID, err)
		}
	}
	s.drop(e)
	s.m.removeUpload(e.job)
	s.m.log.Info("job deleted", "job", e.job.ID, "state", e.job.State)
	return nil
}

// finite reports whether x is a number (not NaN or ±Inf).
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
