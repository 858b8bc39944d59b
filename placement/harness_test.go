package placement

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

const GiB = units.GiB

// rig is an engine over a simulated machine, running in the background.
type rig struct {
	t      *testing.T
	cfg    *rigConfig
	sim    *inventory.Sim
	reader *inventory.Reader
	eng    *Engine
	store  *memStore
	cancel context.CancelFunc
	done   chan struct{}
}

// rigConfig holds the sections a rig's engine reads, named as in
// internal/config's Config so options read the same.
type rigConfig struct {
	Placement Config
	Leases    LeaseConfig
	Inventory inventory.Config
}

type rigOption func(*rigConfig, *Options)

// newRig starts an engine on the given simulated GPUs (each GPU: total
// memory; no processes) or, with seedSim, on the seed's 8×4090 server.
func newRig(t *testing.T, gpus []inventory.SimGPU, opts ...rigOption) *rig {
	t.Helper()
	cfg := &rigConfig{Placement: DefaultConfig(), Leases: DefaultLeaseConfig(), Inventory: inventory.DefaultConfig()}
	cfg.Placement.Reserved = 0
	cfg.Placement.SafetyFactor = 1
	cfg.Inventory.Sim = gpus
	r := &rig{t: t, cfg: cfg, store: newMemStore()}
	o := Options{Store: r.store}
	for _, f := range opts {
		f(cfg, &o)
	}
	r.sim = inventory.NewSim(cfg.Inventory.Sim)
	p, err := inventory.NewNVML(r.sim.Interface(), inventory.WithName("sim"))
	if err != nil {
		t.Fatal(err)
	}
	r.reader = inventory.NewReader(p, cfg.Inventory.MaxAge.D(), nil)
	o.Placement, o.Leases, o.Inventory = cfg.Placement, cfg.Leases, r.reader
	r.eng = New(o)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() { _ = r.eng.Run(ctx); close(r.done) }()
	t.Cleanup(r.stop)
	r.observe()
	return r
}

func (r *rig) stop() {
	r.cancel()
	<-r.done
}

// gpus returns n empty simulated GPUs of size each.
func gpus(n int, size int64) []inventory.SimGPU {
	out := make([]inventory.SimGPU, n)
	for i := range out {
		out[i] = inventory.SimGPU{Name: fmt.Sprintf("sim%d", i), Memory: units.Bytes(size), Temperature: 40}
	}
	return out
}

func seedGPUs(t *testing.T) []inventory.SimGPU {
	t.Helper()
	data, err := os.ReadFile("../testdata/sim-8x4090.toml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Inventory inventory.Config `toml:"inventory"`
	}
	if err := toml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	return file.Inventory.Sim
}

var nextPID atomic.Int64

func req(bytes int64, mods ...func(*Request)) Request {
	pid := int(nextPID.Add(1)) + 100
	r := Request{Bytes: bytes, Holder: Holder{PID: pid, UID: 1000, Name: "test"}}
	for _, m := range mods {
		m(&r)
	}
	return r
}

func wait(d time.Duration) func(*Request) { return func(r *Request) { r.Wait = d } }
func prio(p Priority) func(*Request)      { return func(r *Request) { r.Priority = p } }
func ttl(d time.Duration) func(*Request)  { return func(r *Request) { r.TTL = d } }
func pin(s string) func(*Request)         { return func(r *Request) { r.Device, _ = device.Parse(s) } }
func holder(pid int) func(*Request)       { return func(r *Request) { r.Holder.PID = pid } }

func (r *rig) acquire(q Request) Lease {
	r.t.Helper()
	l, err := r.eng.Acquire(context.Background(), q)
	if err != nil {
		r.t.Fatalf("acquire %s: %v", units.FormatBytes(q.Bytes), err)
	}
	return l
}

func (r *rig) release(id string) {
	r.t.Helper()
	if _, err := r.eng.Release(context.Background(), id, "test"); err != nil {
		r.t.Fatalf("release %s: %v", id, err)
	}
}

func (r *rig) view() View {
	r.t.Helper()
	return r.eng.View()
}

// observe hands the engine a fresh reading, as the daemon's upkeep does at
// start-up and every refresh interval.
func (r *rig) observe(attrs ...Attribution) {
	r.t.Helper()
	snap, err := r.reader.Refresh(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.eng.Observe(context.Background(), snap, attrs...); err != nil {
		r.t.Fatal(err)
	}
}

// acquireAsync starts a waiting Acquire; the result arrives on the channel.
func (r *rig) acquireAsync(q Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := r.eng.Acquire(context.Background(), q)
		ch <- result{lease: l, err: err}
	}()
	return ch
}

// memStore is an in-memory Store that can be made to fail.
type memStore struct {
	mu     sync.Mutex
	leases map[string]Lease
	fail   error
}

func newMemStore() *memStore { return &memStore{leases: map[string]Lease{}} }

// apply stores changes as a BatchStore's commit would.
func (m *memStore) apply(cs []Change) {
	for _, c := range cs {
		if c.Put != nil {
			_ = m.PutLease(*c.Put)
		} else {
			_ = m.DeleteLease(c.Delete)
		}
	}
}

func (m *memStore) PutLease(l Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.leases[l.ID] = l
	return nil
}

func (m *memStore) DeleteLease(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.leases, id)
	return nil
}

func (m *memStore) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.leases)
}
