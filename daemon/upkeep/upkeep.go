// Package upkeep keeps the placement engine true to the machine: it
// recovers stored leases at start-up, releases the leases of processes that
// exit, hands the engine a GPU reading every refresh interval together with
// the processes found to belong to leases (one Observe per tick), and teaches
// the estimator the measured peak of every model lease that ends.
package upkeep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// Engine is the placement engine as upkeep uses it (*placement.Engine).
type Engine interface {
	Restore(ctx context.Context, leases []placement.Lease) error
	HolderExited(ctx context.Context, pid int) ([]placement.Lease, error)
	Subscribe(ctx context.Context, types ...placement.EventType) (<-chan placement.Event, func(), error)
	Observe(ctx context.Context, snap inventory.Snapshot, attrs ...placement.Attribution) error
	View() placement.View
	Accounts() ([]placement.Account, string)
	Owners(ctx context.Context, pids []int) (map[int]placement.Owner, int, error)
}

// Store holds the leases of the previous run and what is learned
// (*store.DB).
type Store interface {
	Leases() ([]placement.Lease, error)
	DeleteLease(id string) error
	// Apply commits several lease changes at once.
	Apply(changes []placement.Change) error
	RecordPeak(k estimator.Key, bytes int64) error
	RecordContext(key string, bytes int64) error
	// BootID is the kernel boot ID the stored leases were granted under.
	BootID() (string, error)
	SetBootID(id string) error
}

// Watcher reports when watched processes exit (*procwatch.Watcher).
type Watcher interface {
	Watch(pid int) error
	WatchProcess(procRoot string, pid int, startTicks uint64) error
	Lookup(procRoot string, pid int) (procwatch.Info, error)
	Unwatch(pid int)
	Exited() <-chan int
}

// Reader re-reads the GPUs (*inventory.Reader).
type Reader interface {
	Refresh(ctx context.Context) (inventory.Snapshot, error)
}

// ErrStopped is returned by Sample once Run has returned.
var ErrStopped = errors.New("upkeep stopped")

var (
	_ Engine = (*placement.Engine)(nil)
	_ Reader = (*inventory.Reader)(nil)
)

// Options configures Upkeep. Engine, Store, Watcher, Reader and Every are
// required.
type Options struct {
	Engine  Engine
	Store   Store
	Watcher Watcher
	Reader  Reader
	// Every is how often the GPUs are re-read ([inventory] refresh_interval).
	Every time.Duration
	// AfterTick, when set, runs after every periodic reading (the daemon
	// updates its systemd status line); not after Recover's.
	AfterTick func()
	Log       *slog.Logger
	// ProcRoot is where /proc is mounted (default "/proc").
	ProcRoot string
}

// Upkeep runs the daemon's background work around the engine.
type Upkeep struct {
	opts Options
	log  *slog.Logger
	// sample carries Sample's requests to the refresh loop, which owns the
	// readings; done is closed when that loop has returned.
	sample chan chan error
	done   chan struct{}
	// events is the engine subscription Recover takes, so that Run, started
	// after it, misses no lease that ends in between; Run owns it.
	events      <-chan placement.Event
	unsubscribe func()
}

// New returns Upkeep; call Recover, then Run.
func New(opts Options) *Upkeep {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	return &Upkeep{opts: opts, log: opts.Log, sample: make(chan chan error), done: make(chan struct{})}
}

// Sample reads the GPUs now, in the refresh loop, and returns once the
// engine has the reading: the plugin host asks right after a Load and after
// each Transcribe, so a peak between two ticks, or just before the daemon
// stops, still reaches the lease (and what is learned from it). The periodic
// readings go on.
func (u *Upkeep) Sample(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case u.sample <- reply:
	case <-u.done:
		return fmt.Errorf("sample GPUs: %w", ErrStopped)
	case <-ctx.Done():
		return fmt.Errorf("sample GPUs: %w", ctx.Err())
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return fmt.Errorf("sample GPUs: %w", ctx.Err())
	}
}

// Run follows process exits and engine events and re-reads the GPUs every
// interval, until ctx ends.
func (u *Upkeep) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { u.pumpExits(ctx) })
	wg.Go(func() { u.pumpEvents(ctx) })
	u.refreshLoop(ctx)
	wg.Wait()
}

// refreshLoop re-reads the GPUs every interval and hands the reading to the
// engine (reconciliation; waiters granted when foreign memory is freed).
func (u *Upkeep) refreshLoop(ctx context.Context) {
	defer close(u.done)
	t := time.NewTimer(u.opts.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case reply := <-u.sample:
			err := u.observe(ctx)
			reply <- err
			if err != nil {
				return
			}
			continue
		case <-t.C:
		}
		if err := u.tick(ctx); err != nil {
			return
		}
		t.Reset(u.opts.Every)
	}
}

// tick observes the GPUs, then runs AfterTick.
func (u *Upkeep) tick(ctx context.Context) error {
	err := u.observe(ctx)
	if u.opts.AfterTick != nil {
		u.opts.AfterTick()
	}
	return err
}

// observe reads the GPUs and hands the engine the reading and the processes
// attributed to leases through their parents, in one Observe. It fails only
// when the engine stopped; a failed reading is logged and skipped.
func (u *Upkeep) observe(ctx context.Context) error {
	snap, err := u.opts.Reader.Refresh(ctx)
	if err != nil {
		u.log.Warn("GPU reading failed", "err", err)
		return nil
	}
	attrs, err := u.attribute(ctx, snap)
	if err != nil {
		return err
	}
	if err := u.opts.Engine.Observe(ctx, snap, attrs...); err != nil {
		if ctx.Err() != nil || errors.Is(err, placement.ErrStopped) {
			return err
		}
		u.log.Warn("GPU reading not taken", "err", err)
		return nil
	}
	for _, a := range attrs {
		_ = u.opts.Watcher.Watch(a.PID)
		u.log.Info("process attributed to lease by parentage", "pid", a.PID, "lease", a.Lease)
	}
	return nil
}
