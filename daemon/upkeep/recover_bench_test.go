package upkeep

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/daemon/store"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// BenchmarkRecover measures a daemon's start-up work with 100k stored
// leases held by this process: open the state database, Recover (holder
// checks, watches, the engine's Restore), close; recover-ms/op is that
// time alone.
func BenchmarkRecover(b *testing.B) {
	const n = 100_000
	dir := filepath.Join(b.TempDir(), "state")
	w0, err := procwatch.NewWatcher(nil)
	if err != nil {
		b.Fatal(err)
	}
	self, err := w0.Lookup("/proc", os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	db, err := store.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	var cs []placement.Change
	now := time.Now()
	for i := 0; i < n; i++ {
		l := placement.Lease{ID: fmt.Sprintf("l-%016x", i), State: placement.StateGranted, GPU: inventory.SimUUID(0), Bytes: 1 << 10,
			Holder: placement.Holder{PID: os.Getpid(), UID: os.Getuid(), StartTicks: self.StartTicks},
			TTL:    time.Hour, Created: now, Granted: now, Expires: now.Add(time.Hour)}
		cs = append(cs, placement.Change{Put: &l})
	}
	if err := db.Apply(cs); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Inventory.Sim = []inventory.SimGPU{{Name: "Sim GPU", Memory: units.Bytes(24 * GiB)}}
	var took time.Duration // the setup above is not timed, whichever way testing runs it
	for b.Loop() {
		start := time.Now()
		recoverOnce(b, dir, cfg, n)
		took += time.Since(start)
	}
	b.ReportMetric(float64(took.Microseconds())/1e3/float64(b.N), "recover-ms/op")
}

func recoverOnce(b *testing.B, dir string, cfg *config.Config, n int) {
	db, err := store.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	p, err := inventory.NewNVML(inventory.NewSim(cfg.Inventory.Sim).Interface(), inventory.WithName("sim"))
	if err != nil {
		b.Fatal(err)
	}
	w, err := procwatch.NewWatcher(nil)
	if err != nil {
		b.Fatal(err)
	}
	reader := inventory.NewReader(p, cfg.Inventory.MaxAge.D(), nil)
	eng := placement.New(placement.Options{Placement: cfg.Placement, Leases: cfg.Leases, Inventory: reader, Store: db})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = eng.Run(ctx) })
	wg.Go(func() { _ = w.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	u := New(Options{Engine: eng, Store: db, Watcher: w, Reader: reader, Every: time.Hour})
	if err := u.Recover(ctx); err != nil {
		b.Fatal(err)
	}
	if got := eng.Summary(); got.Leases != n {
		b.Fatalf("%d leases restored, want %d", got.Leases, n)
	}
}
