package placement

import "context"

// AddProcessAs is AddPIDAs with the process's start time (clock ticks since
// boot, from /proc/PID/stat; 0 when unknown). The start time is stored
// with the lease, so that after a restart a PID that now belongs to
// another process is not counted against it.
func (e *Engine) AddProcessAs(ctx context.Context, id string, pid int, startTicks uint64, may Guard) (Lease, error) {
	return e.call(ctx, guarded(id, may, func(s *state) (Lease, error) { return s.addProcess(id, pid, startTicks) }))
}
