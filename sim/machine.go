package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// epoch is virtual time zero.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// clock is the virtual clock the engine reads (from its own goroutine).
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// machine is the real placement engine over simulated H100s.
type machine struct {
	eng    *placement.Engine
	clk    *clock
	cancel context.CancelFunc
	done   chan struct{}
	nextID int
	mu     sync.Mutex // nextID: the engine calls NewID from its goroutine
}

// leaseTTL outlives any simulation: instances end by release only.
const leaseTTL = 100000 * time.Hour

func newMachine(ctx context.Context, cfg Config) (*machine, error) {
	used := units.Bytes(driverReservedBytes)
	gpus := make([]inventory.SimGPU, cfg.GPUs)
	for i := range gpus {
		gpus[i] = inventory.SimGPU{Name: H100, UUID: fmt.Sprintf("GPU-sim-%02d", i), Memory: units.Bytes(h100Bytes), Used: &used, Temperature: 40}
	}
	sim := inventory.NewSim(gpus)
	p, err := inventory.NewNVML(sim.Interface(), inventory.WithName("sim"))
	if err != nil {
		return nil, fmt.Errorf("sim: inventory: %w", err)
	}
	m := &machine{clk: &clock{now: epoch}, done: make(chan struct{})}
	leases := placement.DefaultLeaseConfig()
	leases.DefaultTTL, leases.MaxTTL = units.Duration(leaseTTL), units.Duration(leaseTTL)
	reader := inventory.NewReader(p, inventory.DefaultConfig().MaxAge.D(), nil)
	m.eng = placement.New(placement.Options{
		Placement: placement.DefaultConfig(), Leases: leases, Inventory: reader,
		Now: m.clk.Now, NewID: m.newID,
	})
	ctx, m.cancel = context.WithCancel(ctx)
	go func() { _ = m.eng.Run(ctx); close(m.done) }()
	snap, err := reader.Fresh(ctx)
	if err == nil {
		err = m.eng.Observe(ctx, snap) // the first reading, before any request
	}
	if err != nil {
		m.stop()
		return nil, fmt.Errorf("sim: first GPU reading: %w", err)
	}
	return m, nil
}

func (m *machine) newID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextID++
	return fmt.Sprintf("l-sim-%d", m.nextID)
}

func (m *machine) stop() { m.cancel(); <-m.done }

// acquire asks the engine for bytes on GPU index gpu, without waiting.
func (m *machine) acquire(ctx context.Context, gpu int, bytes int64, pid, uid int, prio placement.Priority) (placement.Lease, error) {
	dev, err := device.Parse(fmt.Sprintf("cuda:%d", gpu))
	if err != nil {
		return placement.Lease{}, err
	}
	return m.eng.Acquire(ctx, placement.Request{Bytes: bytes, Device: dev, Priority: prio, TTL: leaseTTL,
		Holder: placement.Holder{PID: pid, UID: uid, Name: "wsched-sim"}})
}

// available is each GPU's available bytes in the engine's accounting.
func (m *machine) available(out []int64) {
	accts, _ := m.eng.Accounts()
	for _, a := range accts {
		if a.Index >= 0 && a.Index < len(out) {
			out[a.Index] = a.AvailableBytes
		}
	}
}
