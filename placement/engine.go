package placement

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wsched/wsched/internal/owner"
	"github.com/wsched/wsched/placement/inventory"
)

// Snapshotter gives inventory readings no older than the configured maximum
// age (inventory.Reader does).
type Snapshotter interface {
	Fresh(ctx context.Context) (inventory.Snapshot, error)
}

// Store persists leases. PutLease is called before a grant, renewal or
// resize is answered; a failing PutLease fails the operation, so no lease is
// ever granted that a restart would forget. DeleteLease is called when a
// lease ends.
type Store interface {
	PutLease(Lease) error
	DeleteLease(id string) error
}

// Options configures an Engine.
type Options struct {
	Placement Config
	Leases    LeaseConfig
	// Inventory provides readings; required.
	Inventory Snapshotter
	// Store persists leases; nil keeps them in memory only.
	Store Store
	// Signal is called with a holder's PID when it overruns its lease and
	// [leases] overrun = "kill". nil disables killing.
	Signal func(pid int)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Log receives decisions at debug level and problems at warn.
	Log *slog.Logger
	// NewID makes lease IDs (random when nil).
	NewID func() string

	afterOp func(*state) // tests: invariant checks after every step
}

// Engine owns leases, the queue and accounting. One goroutine (Run) holds
// all mutable state; the methods send it closures and wait for the result,
// except View, which reads the state the loop last published.
type Engine struct {
	loop  *owner.Loop[*state]
	st    *state
	board *board // the published view; read by View from any goroutine

	// later holds work other goroutines (the journal) hand back to the
	// owner loop; kick wakes the loop for it.
	laterMu sync.Mutex
	later   []func(*state)
	kick    chan struct{}
}

// New returns an engine; start it with Run.
func New(opts Options) *Engine {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.NewID == nil {
		opts.NewID = randomID
	}
	if opts.Placement.Policy == "" { // a Config built in code: the default policy
		opts.Placement.Policy = PolicySpread
	}
	e := &Engine{loop: owner.New[*state](ErrStopped), st: newState(opts), kick: make(chan struct{}, 1)}
	e.st.later, e.board = e.defer1, e.st.board
	e.st.settle() // an empty view until the first reading
	return e
}

// defer1 queues f to run on the owner loop; safe from any goroutine and
// never blocks.
func (e *Engine) defer1(f func(*state)) {
	e.laterMu.Lock()
	e.later = append(e.later, f)
	e.laterMu.Unlock()
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

func (e *Engine) runLater(s *state) {
	e.laterMu.Lock()
	fs := e.later
	e.later = nil
	e.laterMu.Unlock()
	for _, f := range fs {
		f(s)
	}
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "l-" + hex.EncodeToString(b[:])
}

// Run is the owner loop. It returns when ctx ends; waiting requests are then
// rejected with ErrStopped. Leases stay in the store for the next start.
func (e *Engine) Run(ctx context.Context) error {
	defer e.loop.Stop()
	s := e.st
	if err := s.opts.Placement.Policy.Check(); err != nil { // not taken for spread
		return fmt.Errorf("placement: %w", err)
	}
	s.ctx = ctx
	if s.journal != nil {
		defer func() { _ = s.journal.close() }() // commits what is queued
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.rearm(timer)
		select {
		case <-ctx.Done():
			s.shutdown()
			s.settle()
			return nil
		case o := <-e.loop.Ops():
			s.catchUp()
			e.runOps(s, o)
		case <-e.kick:
			s.catchUp()
			e.runLater(s)
			s.afterOp()
		case <-timer.C:
			s.catchUp()
			s.tick()
			s.markChanged() // the queue's order ages with time
			s.afterOp()
		}
		s.settle()
	}
}

// afterOp runs the test hook after each operation, not each batch: the
// randomized test's invariants are about what one operation may change.
func (s *state) afterOp() {
	if s.opts.afterOp != nil {
		s.opts.afterOp(s)
	}
}

// maxBatch bounds how many queued operations one step of the owner loop
// runs before it publishes the view and answers them.
const maxBatch = 64

// runOps runs o and the operations already queued behind it (up to
// maxBatch), so that one publish serves them all.
func (e *Engine) runOps(s *state, o owner.Op[*state]) {
	for n := 1; ; n++ {
		o.Run(s)
		s.afterOp()
		s.answer(o.Finish)
		if n == maxBatch {
			return
		}
		select {
		case o = <-e.loop.Ops():
		default:
			return
		}
	}
}

// do runs f on the owner loop and waits until the view it changed is
// published.
func (e *Engine) do(ctx context.Context, f func(*state)) error { return e.loop.Do(ctx, f) }

// Acquire asks for a lease. It returns at once when the request is granted
// or cannot wait; otherwise it waits in the queue up to req.Wait (capped by
// [leases] max_wait). If ctx ends while waiting the request is withdrawn, and
// a grant that raced with it is released.
func (e *Engine) Acquire(ctx context.Context, req Request) (Lease, error) {
	reply := make(chan result, 1)
	var id string
	if err := e.do(ctx, func(s *state) { id = s.submit(req, reply) }); err != nil {
		return Lease{}, err
	}
	select {
	case r := <-reply:
		return e.deliver(ctx, id, r)
	case <-ctx.Done():
		e.takeBack(id)
		return Lease{}, fmt.Errorf("%w: %w", ErrCancelled, ctx.Err())
	case <-e.loop.Stopped():
		e.takeBack(id)
		return Lease{}, ErrStopped
	}
}

// call runs f on the owner loop and returns its lease and error.
// When f recorded a change its caller must see durable (persistAsync), the
// change is committed here, outside the loop, before call returns.
func (e *Engine) call(ctx context.Context, f func(*state) (Lease, error)) (Lease, error) {
	var l Lease
	var err error
	var seq uint64
	if derr := e.do(ctx, func(s *state) {
		s.opSeq = 0
		l, err = f(s)
		seq, s.opSeq = s.opSeq, 0
	}); derr != nil {
		return Lease{}, derr
	}
	if err == nil && seq != 0 {
		if cerr := e.st.journal.sync(ctx, seq); cerr != nil {
			return Lease{}, fmt.Errorf("persist lease %s: %w", l.ID, cerr)
		}
	}
	return l, err
}

// Release ends a lease. Releasing an ended lease returns it unchanged.
func (e *Engine) Release(ctx context.Context, id, reason string) (Lease, error) {
	return e.call(ctx, func(s *state) (Lease, error) { return s.release(id, reason) })
}

// Renew extends a lease to now + ttl (0: its own TTL).
func (e *Engine) Renew(ctx context.Context, id string, ttl time.Duration) (Lease, error) {
	return e.call(ctx, func(s *state) (Lease, error) { return s.renew(id, ttl) })
}

// Resize changes a lease's size: shrinking always succeeds, growing only if
// the extra bytes fit on its GPU now.
func (e *Engine) Resize(ctx context.Context, id string, bytes int64) (Lease, error) {
	return e.call(ctx, func(s *state) (Lease, error) { return s.resize(id, bytes) })
}

// Get returns a lease or queued request by ID, including recently ended ones.
func (e *Engine) Get(ctx context.Context, id string) (Lease, error) {
	return e.call(ctx, func(s *state) (Lease, error) { return s.get(id) })
}

// Guard decides, on the owner loop, whether a caller may change a lease (as
// it is when the change applies); its error is returned instead.
type Guard func(Lease) error

// guarded runs f only if may allows the lease (granted, queued or ended).
func guarded(id string, may Guard, f func(*state) (Lease, error)) func(*state) (Lease, error) {
	return func(s *state) (Lease, error) {
		l, err := s.get(id)
		if err == nil {
			err = may(l)
		}
		if err != nil {
			return Lease{}, err
		}
		return f(s)
	}
}

// ReleaseAs is Release for a caller may allows, decided in the same step.
func (e *Engine) ReleaseAs(ctx context.Context, id, reason string, may Guard) (Lease, error) {
	return e.call(ctx, guarded(id, may, func(s *state) (Lease, error) { return s.release(id, reason) }))
}

// RenewAs is Renew for a caller may allows, decided in the same step.
func (e *Engine) RenewAs(ctx context.Context, id string, ttl time.Duration, may Guard) (Lease, error) {
	return e.call(ctx, guarded(id, may, func(s *state) (Lease, error) { return s.renew(id, ttl) }))
}

// AddPIDAs is AddPID for a caller may allows, decided in the same step.
func (e *Engine) AddPIDAs(ctx context.Context, id string, pid int, may Guard) (Lease, error) {
	return e.call(ctx, guarded(id, may, func(s *state) (Lease, error) { return s.addPID(id, pid) }))
}

// AddPID counts pid's GPU memory against lease id.
func (e *Engine) AddPID(ctx context.Context, id string, pid int) (Lease, error) {
	return e.call(ctx, func(s *state) (Lease, error) { return s.addPID(id, pid) })
}

// RemovePID stops counting pid against lease id (the process exited).
func (e *Engine) RemovePID(ctx context.Context, id string, pid int) (Lease, error) {
	return e.call(ctx, func(s *state) (Lease, error) { return s.removePID(id, pid) })
}

// HolderExited releases every lease whose holder is pid.
func (e *Engine) HolderExited(ctx context.Context, pid int) ([]Lease, error) {
	var out []Lease
	err := e.do(ctx, func(s *state) { out = s.holderExited(pid) })
	return out, err
}

// Restore adds leases recovered from the store at start-up. Call it before
// serving requests; leases whose holders died must be filtered out first.
// The engine takes the slice over: the caller must not use it afterwards.
func (e *Engine) Restore(ctx context.Context, leases []Lease) error {
	return e.do(ctx, func(s *state) { s.restore(leases) })
}

// Subscribe returns a channel of every event from now on (of the given
// types only, when any are given: the engine sends a subscriber nothing
// else, so it is not woken for what it ignores), and a function that ends
// the subscription. The channel is closed if the reader falls more than
// 1024 events behind, or when the engine stops.
func (e *Engine) Subscribe(ctx context.Context, types ...EventType) (<-chan Event, func(), error) {
	ch := make(chan Event, subscriberBuffer)
	if len(types) == 0 {
		types = nil
	}
	var id int
	if err := e.do(ctx, func(s *state) { id = s.subscribe(ch, types) }); err != nil {
		return nil, nil, err
	}
	cancel := func() { _ = e.do(context.Background(), func(s *state) { s.unsubscribe(id) }) }
	return ch, cancel, nil
}

// Sync waits until every lease change made so far is durable in the Store.
func (e *Engine) Sync(ctx context.Context) error {
	if e.st.journal == nil {
		return nil
	}
	// A step hands its changes to the journal as it ends: once this empty
	// step has run, every change made so far is queued.
	if err := e.do(ctx, func(*state) {}); err != nil {
		return err
	}
	return e.st.journal.sync(ctx, 0)
}

// Ping returns once the owner loop has answered: a liveness check for the
// systemd watchdog.
func (e *Engine) Ping(ctx context.Context) error { return e.do(ctx, func(*state) {}) }

// View returns the accounting per GPU, the leases and queue, and counters,
// as the owner loop last published them (after its latest change). It does
// not wait for the loop and changes nothing. The View is shared: callers
// must not modify it.
func (e *Engine) View() View { return e.board.frame.Load().View() }

// Summary counts the GPUs, leases and queued requests of the latest
// published state, and says when its reading was taken, in O(GPUs): for
// callers that need no more than that (status lines, change checks).
func (e *Engine) Summary() Summary { return e.board.frame.Load().summary() }

// Accounts returns every GPU's account as last published, and the driver
// version, in O(GPUs): for callers that size requests and need no leases.
func (e *Engine) Accounts() ([]Account, string) { return e.board.frame.Load().accounts() }
