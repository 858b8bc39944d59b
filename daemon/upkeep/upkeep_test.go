package upkeep

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/daemon/store"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

const GiB = units.GiB

// countingDB is the state database, counting the engine's commits.
type countingDB struct {
	*store.DB
	mu      sync.Mutex
	commits int
}

func (c *countingDB) Apply(cs []placement.Change) error {
	c.mu.Lock()
	c.commits++
	c.mu.Unlock()
	return c.DB.Apply(cs)
}

func (c *countingDB) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commits
}

type rig struct {
	sim *inventory.Sim
	db  *countingDB
	eng *placement.Engine
	u   *Upkeep
}

// newRig runs an engine over one simulated 24 GiB GPU with a real state
// database and process watcher, and returns Upkeep over them (not running).
func newRig(t *testing.T) *rig {
	t.Helper()
	cfg := config.Defaults()
	cfg.Placement.Reserved, cfg.Placement.SafetyFactor = 0, 1
	cfg.Inventory.Sim = []inventory.SimGPU{{Name: "Sim GPU", Memory: units.Bytes(24 * GiB)}}
	sim := inventory.NewSim(cfg.Inventory.Sim)
	p, err := inventory.NewNVML(sim.Interface(), inventory.WithName("sim"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w, err := procwatch.NewWatcher(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{sim: sim, db: &countingDB{DB: db}}
	reader := inventory.NewReader(p, cfg.Inventory.MaxAge.D(), nil)
	r.eng = placement.New(placement.Options{Placement: cfg.Placement, Leases: cfg.Leases, Inventory: reader, Store: r.db})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.eng.Run(ctx) })
	wg.Go(func() { _ = w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	r.u = New(Options{Engine: r.eng, Store: r.db, Watcher: w, Reader: reader, Every: time.Hour})
	return r
}

// start recovers the rig's upkeep and runs it until the test ends (or the
// returned cancel is called).
func (r *rig) start(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	if err := r.u.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	go r.u.Run(ctx)
	return ctx, cancel
}

// TestTickAttributesChildren: a GPU process started by a lease's holder is
// counted against the lease by the next reading, persisted in one commit.
func TestTickAttributesChildren(t *testing.T) {
	r := newRig(t)
	holder := exec.Command("sh", "-c", "sleep 30 & echo $!; wait")
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	var line [16]byte
	n, _ := out.Read(line[:])
	child, err := strconv.Atoi(strings.TrimSpace(string(line[:n])))
	if err != nil {
		t.Fatalf("child pid %q: %v", line[:n], err)
	}
	if err := r.u.Recover(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := r.eng.Acquire(t.Context(), placement.Request{Bytes: 4 * GiB, Holder: placement.Holder{PID: holder.Process.Pid}})
	if err != nil {
		t.Fatal(err)
	}
	_ = r.sim.SetProcess(0, child, "sleep", 3*GiB)
	before := r.db.count()
	if err := r.u.tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, _ := r.eng.Get(t.Context(), l.ID)
	if !slices.Contains(got.PIDs, child) || got.UsedBytes != 3*GiB {
		t.Errorf("lease after the reading: pids %v, used %d; want child %d counted (3 GiB)", got.PIDs, got.UsedBytes, child)
	}
	if c := r.db.count() - before; c != 1 {
		t.Errorf("%d commits for one reading; want 1", c)
	}
	stored, _ := r.db.Leases()
	if len(stored) != 1 || !slices.Contains(stored[0].PIDs, child) {
		t.Errorf("stored leases %+v; want the child's pid stored", stored)
	}
}

// TestLearnsPeakOfEndedLease: a lease sized by an estimate teaches the
// estimator its measured peak, for the GPU model it ran on, when it ends.
func TestLearnsPeakOfEndedLease(t *testing.T) {
	r := newRig(t)
	r.sim.SetDriver("550.54.15") // learned under the driver's major version
	ctx, _ := r.start(t)
	key := estimator.Key{Backend: estimator.WhisperCpp, Model: "medium", Precision: "f16", Beam: 1, Batch: 1}
	self := placement.Holder{PID: 1}
	l, err := r.eng.Acquire(ctx, placement.Request{Bytes: 4 * GiB, Holder: self, EstimateKey: &key})
	if err != nil {
		t.Fatal(err)
	}
	_ = r.sim.SetProcess(0, 1, "init", 3*GiB)
	if err := r.u.tick(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eng.Release(ctx, l.ID, "done"); err != nil {
		t.Fatal(err)
	}
	key.GPUModel, key.Driver = "Sim GPU", "550"
	deadline := time.Now().Add(10 * time.Second)
	for {
		peaks, err := r.db.Peaks(key)
		if err == nil && slices.Equal(peaks, []int64{3 * GiB}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("peaks for %s: %v, %v; want [3 GiB]", key, peaks, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSampleLearnsPostJobPeak: with readings an hour apart, the simulated
// NVML usage of the holder rises after a "Transcribe"; Sample (what the host
// calls after each Transcribe) puts that figure on the lease at once, and
// the lease released right after teaches it.
func TestSampleLearnsPostJobPeak(t *testing.T) {
	r := newRig(t)
	ctx, cancel := r.start(t)
	key := estimator.Key{Backend: estimator.WhisperCpp, Model: "tiny", Precision: "f16", Beam: 5, Batch: 1}
	l, err := r.eng.Acquire(ctx, placement.Request{Bytes: 2 * GiB, Holder: placement.Holder{PID: 1}, EstimateKey: &key})
	if err != nil {
		t.Fatal(err)
	}
	_ = r.sim.SetProcess(0, 1, "backend", 700*estimator.MiB) // after Load
	if err := r.u.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	_ = r.sim.SetProcess(0, 1, "backend", 890*estimator.MiB) // after Transcribe
	if err := r.u.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := r.eng.Get(ctx, l.ID)
	if got.PeakBytes != 890*estimator.MiB {
		t.Fatalf("lease peak %d after the post-job sample; want 890 MiB", got.PeakBytes)
	}
	if _, err := r.eng.Release(ctx, l.ID, "done"); err != nil {
		t.Fatal(err)
	}
	key.GPUModel = "Sim GPU"
	deadline := time.Now().Add(10 * time.Second)
	for {
		peaks, err := r.db.Peaks(key)
		if err == nil && slices.Equal(peaks, []int64{890 * estimator.MiB}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("peaks for %s: %v, %v; want [890 MiB]", key, peaks, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-r.u.done // the refresh loop has returned (Run itself waits for the engine's events to end)
	if err := r.u.Sample(context.Background()); !errors.Is(err, ErrStopped) {
		t.Errorf("Sample after Run returned: %v, want ErrStopped", err)
	}
}

// TestSampleStartLearnsContext: a backend's reading right after it started
// (before Load) is its bare CUDA context, recorded for the GPU model and
// driver; a process with no context yet, or one that holds far more than a
// context, teaches nothing.
func TestSampleStartLearnsContext(t *testing.T) {
	r := newRig(t)
	ctx, _ := r.start(t)
	key := estimator.ContextKey("Sim GPU", r.eng.View().Driver)
	for i, used := range []int64{4 * estimator.MiB, 3 * GiB, 536 * estimator.MiB} {
		pid := 100 + i
		l, err := r.eng.Acquire(ctx, placement.Request{Bytes: 4 * GiB, Holder: placement.Holder{PID: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.eng.AddPID(ctx, l.ID, pid); err != nil {
			t.Fatal(err)
		}
		_ = r.sim.SetProcess(0, pid, "backend", used)
		if err := r.u.SampleStart(ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		_ = r.sim.SetProcess(0, pid, "backend", 0)
		if _, err := r.eng.Release(ctx, l.ID, "done"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.db.Contexts(key)
	if err != nil || !slices.Equal(got, []int64{536 * estimator.MiB}) {
		t.Fatalf("contexts for %q: %v, %v; want [536 MiB] only", key, got, err)
	}
}
