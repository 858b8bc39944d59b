package placement

import (
	"context"
	"fmt"

	"github.com/wsched/wsched/internal/units"
)

// Usage is what a holder's allocation cap (the preload enforcement tier)
// reports at allocation time: the GPU memory the process holds through the
// driver's allocation calls, and an allocation it refused.
type Usage struct {
	PID        int
	UsedBytes  int64
	PeakBytes  int64
	LimitBytes int64
	// RefusedBytes is the allocation just refused (0: the report says the
	// process passed its lease, borrowing up to its limit).
	RefusedBytes      int64
	RefusedTotalBytes int64
}

// ReportUsageAs records u for lease id, for a caller may allows. An
// allocation refused past the cap, or use beyond the lease, is an overrun
// event at once, without waiting for the next NVML sample; the lease's
// measured use is left to the samples (the report counts one process only).
func (e *Engine) ReportUsageAs(ctx context.Context, id string, u Usage, may Guard) (Lease, error) {
	return e.call(ctx, guarded(id, may, func(s *state) (Lease, error) { return s.reportUsage(id, u) }))
}

func (s *state) reportUsage(id string, u Usage) (Lease, error) {
	l, err := s.active(id)
	if err != nil {
		return Lease{}, err
	}
	if u.UsedBytes < 0 || u.RefusedBytes < 0 || u.PID < 0 {
		return Lease{}, fmt.Errorf("%w: usage bytes and pid must not be negative", ErrInvalid)
	}
	s.setBorrowed(l, u.UsedBytes)
	var reason string
	switch {
	case u.RefusedBytes > 0:
		reason = fmt.Sprintf("allocation of %s refused by the preload cap (pid %d holds %s, cap %s, lease %s)",
			units.FormatBytes(u.RefusedBytes), u.PID, units.FormatBytes(u.UsedBytes),
			units.FormatBytes(u.LimitBytes), units.FormatBytes(l.Bytes))
	case u.UsedBytes > l.Bytes:
		reason = fmt.Sprintf("pid %d allocated %s of a %s lease (borrowing, cap %s)", u.PID,
			units.FormatBytes(u.UsedBytes), units.FormatBytes(l.Bytes), units.FormatBytes(u.LimitBytes))
	default:
		return l.clone(), nil
	}
	s.log.Warn("lease overrun", "lease", l.ID, "holder", l.Holder.PID, "pid", u.PID, "reason", reason, "source", "preload")
	s.emit(EventOverrun, l, reason)
	return l.clone(), nil
}
