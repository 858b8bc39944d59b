package enforce

import (
	"context"
	"log/slog"
	"os"

	"github.com/wsched/wsched/placement"
)

// Setter is the driver's per-cgroup memory-limits call
// (*nvmllimits.Lib).
type Setter interface {
	Set(uuid, cgroupDir string, soft, hard uint64) error
	Clear(uuid, cgroupDir string) error
}

// Limits keeps the nvml-limits tier's limits on the holders' cgroups: soft
// = the lease, hard = lease + borrow, set when a holder's cgroup is
// attached, changed when its lease is resized, cleared before the cgroup
// is removed. One goroutine (Run) owns the cgroups attached.
type Limits struct {
	set    Setter
	borrow int64
	ops    chan func(held)
	done   chan struct{} // closed when Run returns
	log    *slog.Logger
}

// held is, per lease ID, the cgroup directories attached and the GPU.
type held map[string]*attached

type attached struct {
	gpu  string
	dirs map[string]bool
}

// NewLimits makes a Limits that calls set; Run must run for Attach to act.
func NewLimits(set Setter, borrow int64, log *slog.Logger) *Limits {
	return &Limits{set: set, borrow: max(borrow, 0), ops: make(chan func(held)), done: make(chan struct{}), log: log}
}

// Run owns the attached cgroups until ctx ends, following placement's
// events: `resized` sets the limits again; `released` and `expired` clear
// those of cgroups still there and forget the lease (other types are
// ignored).
func (m *Limits) Run(ctx context.Context, events <-chan placement.Event) {
	defer close(m.done)
	h := held{}
	for {
		select {
		case <-ctx.Done():
			return
		case op := <-m.ops:
			op(h)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			m.follow(h, ev)
		}
	}
}

func (m *Limits) follow(h held, ev placement.Event) {
	a := h[ev.Lease.ID]
	if a == nil {
		return
	}
	switch ev.Type {
	case placement.EventResized:
		for dir := range a.dirs {
			m.apply(a.gpu, dir, ev.Lease.Bytes)
		}
	case placement.EventReleased, placement.EventExpired:
		for dir := range a.dirs {
			if _, err := os.Stat(dir); err == nil { // a removed cgroup took its limits with it
				m.clear(a.gpu, dir)
			}
		}
		delete(h, ev.Lease.ID)
	}
}

// Attach sets lease l's limits on the cgroup dir and returns what clears
// them (call it before the cgroup is removed). A CPU lease attaches nothing.
func (m *Limits) Attach(l placement.Lease, dir string) (detach func()) {
	if l.GPU == "" || l.GPU == placement.CPU || dir == "" {
		return func() {}
	}
	m.do(func(h held) {
		a := h[l.ID]
		if a == nil {
			a = &attached{gpu: l.GPU, dirs: map[string]bool{}}
			h[l.ID] = a
		}
		a.dirs[dir] = true
		m.apply(l.GPU, dir, l.Bytes)
	})
	return func() {
		m.do(func(h held) {
			if a := h[l.ID]; a != nil {
				delete(a.dirs, dir)
				if len(a.dirs) == 0 {
					delete(h, l.ID)
				}
			}
			m.clear(l.GPU, dir)
		})
	}
}

func (m *Limits) clear(gpu, dir string) {
	if err := m.set.Clear(gpu, dir); err != nil {
		m.log.Warn("nvml-limits: limits not cleared", "cgroup", dir, "err", err)
	}
}

// apply sets soft = lease, hard = lease + borrow.
func (m *Limits) apply(gpu, dir string, lease int64) {
	soft := uint64(max(lease, 0))
	if err := m.set.Set(gpu, dir, soft, soft+uint64(m.borrow)); err != nil {
		m.log.Warn("nvml-limits: limits not set", "gpu", gpu, "cgroup", dir, "lease_bytes", lease, "err", err)
	}
}

// do runs op on the owner goroutine and waits for it (not at all once Run
// has returned).
func (m *Limits) do(op func(held)) {
	ran := make(chan struct{})
	select {
	case m.ops <- func(h held) { op(h); close(ran) }:
		<-ran
	case <-m.done:
	}
}
