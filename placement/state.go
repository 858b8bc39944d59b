package placement

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

// endedKeep is how many ended leases and rejected requests stay readable.
const endedKeep = 4096

// state is everything the owner loop owns. Only Run's goroutine touches it.
type state struct {
	opts Options
	ctx  context.Context
	log  *slog.Logger

	snap     inventory.Snapshot
	haveSnap bool
	stale    bool // a lease with measured memory ended: re-read before deciding

	leases map[string]*Lease // granted
	// lastWake is when the owner loop last woke (monotonic; see catchUp).
	lastWake time.Time
	// books is the accounting per GPU of the reading, in its order; bookBy
	// finds a book by UUID, also for GPUs the reading no longer lists.
	books  []*book
	bookBy map[string]*book
	acct   []Account // books' accounts, refreshed for the books in acctDirty
	gtree  gpuTree   // over acct: the spread pick and the most available
	// byIndex maps a GPU index to its position in the reading.
	byIndex   map[int]int
	maxUsable int64
	// acctAll says every entry of acct must be recomputed (new reading).
	acctAll   bool
	acctDirty []*book
	cpuPub    *tnode // published CPU leases
	// bulk, during restore, collects the published copies per GPU UUID
	// (or CPU) for tbuild instead of one tput per lease.
	bulk map[string][]*tnode
	// owners maps a process to the leases listing it (as holder or
	// registered process); gpuLeases counts the GPU leases.
	owners    map[int]map[*Lease]struct{}
	gpuLeases int
	// reclaiming holds the reclaimable leases asked back (EventReclaim) and
	// not yet released; covered the waiters that memory is for;
	// reclaimable the granted leases marked reclaimable.
	reclaiming  map[string]bool
	covered     map[*waiter]bool
	reclaimable map[string]*Lease
	borrow      borrowBook // leases borrowing past their size (borrow.go)
	// measured are the leases whose UsedBytes or Overrun the last
	// reconcile set, so the next one can clear them.
	measured map[*Lease]struct{}
	queue    queue
	// uids are the per-uid counts and recent use (uids.go); activeUIDs
	// counts those holding or waiting for GPU memory; sumUsable is the
	// placeable GPUs' usable memory (the fair share's whole).
	uids       map[int]*uidAcct
	activeUIDs int
	sumUsable  int64
	uidsDirty  bool
	fair       fairness // the queue's order at the latest plan (uids.go)
	pubUIDs    []uidRow
	expiry     deadlines[string]
	deadlines  deadlines[*waiter]
	ended      map[string]*Lease
	endedQ     []string
	subs       map[int]*subscriber
	nextSub    int
	seq        uint64
	stats      Stats
	waitSeq    uint64

	journal *journal           // nil without a Store
	jbuf    []journalEntry     // this step's changes, not yet handed to it
	jseq    uint64             // sequence number of the last change recorded
	opSeq   uint64             // the change the current call's caller commits before answering (Engine.call)
	later   func(func(*state)) // hands work back to the owner loop

	board     *board  // where views are published (publish.go)
	pubDirty  []*book // books whose published part changed
	pubAll    bool    // a new reading: publish every GPU anew
	pubGPUs   gpuFrames
	pubCopied map[int]bool // chunks of pubGPUs already copied for this frame
	dirty     bool         // something visible changed in this step
	gen       uint64       // generation of the last published view
	answers   []func()     // replies held until this step's view is published
}

type result struct {
	lease Lease
	err   error
	seq   uint64 // the grant's change in the journal: the caller commits it (journal.sync) before answering
}

func newState(opts Options) *state {
	s := &state{
		opts: opts, ctx: context.Background(), log: opts.Log,
		leases: map[string]*Lease{}, ended: map[string]*Lease{}, subs: map[int]*subscriber{},
		reclaiming: map[string]bool{}, covered: map[*waiter]bool{}, reclaimable: map[string]*Lease{},
		bookBy: map[string]*book{}, uids: map[int]*uidAcct{}, owners: map[int]map[*Lease]struct{}{}, measured: map[*Lease]struct{}{}, queue: newQueue(),
		board: &board{}, dirty: true,
	}
	if opts.Store != nil {
		s.journal = newJournal(opts.Store)
	}
	return s
}

func (s *state) now() time.Time { return s.opts.Now() }

// fresh makes sure the reading is young enough to decide on. A failed
// reading keeps the previous one; ErrNoInventory when there is none.
func (s *state) fresh() error {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	var snap inventory.Snapshot
	var err error
	if s.stale {
		if r, ok := s.opts.Inventory.(interface {
			Refresh(context.Context) (inventory.Snapshot, error)
		}); ok {
			snap, err = r.Refresh(ctx)
		} else {
			snap, err = s.opts.Inventory.Fresh(ctx)
		}
	} else {
		snap, err = s.opts.Inventory.Fresh(ctx)
	}
	if err != nil {
		s.log.Warn("GPU reading failed; deciding on the previous one", "err", err)
		if !s.haveSnap {
			return fmt.Errorf("%w: %w", ErrNoInventory, err)
		}
		return nil
	}
	if !s.haveSnap || !snap.Taken.Equal(s.snap.Taken) {
		s.adopt(snap)
	}
	return nil
}

// submit validates a request and either answers it at once (grant or
// rejection) or queues it. It returns the request's ID.
func (s *state) submit(req Request, reply chan<- result) string {
	now := s.now()
	l := &Lease{
		ID: s.opts.NewID(), State: StateQueued, GPUIndex: -1, Bytes: req.Bytes, Device: req.Device,
		Priority: req.Priority, Holder: req.Holder, TTL: req.TTL, Created: now, Labels: req.Labels,
		EstimateKey: req.EstimateKey,
	}
	if l.TTL == 0 {
		l.TTL = s.opts.Leases.DefaultTTL.D()
	}
	s.waitSeq++
	w := &waiter{lease: l, wait: min(req.Wait, s.opts.Leases.MaxWait.D()), reply: reply, seq: s.waitSeq}
	w.deadline = now.Add(w.wait)
	s.emit(EventRequested, l, "")
	if err := s.validate(req, l); err != nil {
		s.reject(w, err)
		return l.ID
	}
	if err := s.admit(l, req.Limits); err != nil {
		s.reject(w, err)
		return l.ID
	}
	l.limitBytes = req.Limits.Bytes
	if req.Device.Kind == device.CPU {
		s.grant(w, Account{Index: -1, UUID: CPU})
		return l.ID
	}
	if err := s.fresh(); err != nil {
		s.reject(w, err)
		return l.ID
	}
	if len(s.snap.GPUs) == 0 && req.Device.Kind == device.Auto {
		s.grant(w, Account{Index: -1, UUID: CPU}) // a machine without GPUs runs on the CPU
		return l.ID
	}
	if err := s.feasible(w); err != nil {
		s.reject(w, err)
		return l.ID
	}
	s.enqueue(w)
	s.dispatch()
	if l.State != StateQueued {
		return l.ID
	}
	switch {
	case w.wait <= 0 && s.covered[w]:
		w.wait = s.opts.Leases.ReclaimWait.D()
		w.deadline = now.Add(w.wait)
		s.deadlines.set(w, w.deadline)
		s.emit(EventQueued, l, fmt.Sprintf("waiting up to %s for reclaimed memory", w.wait))
	case w.wait <= 0:
		s.reject(w, s.noFit(w))
	case s.queue.len() > s.opts.Leases.MaxQueue:
		s.reject(w, fmt.Errorf("%w: %d requests are waiting ([leases] max_queue)", ErrQueueFull, s.opts.Leases.MaxQueue))
	default:
		s.emit(EventQueued, l, fmt.Sprintf("waiting up to %s", w.wait))
	}
	return l.ID
}

func (s *state) validate(req Request, l *Lease) error {
	switch {
	case req.Bytes <= 0 && req.Device.Kind != device.CPU:
		return fmt.Errorf("%w: memory_bytes must be above 0", ErrInvalid)
	case req.TTL < 0 || req.Wait < 0:
		return fmt.Errorf("%w: ttl and wait must not be negative", ErrInvalid)
	case l.TTL > s.opts.Leases.MaxTTL.D():
		return fmt.Errorf("%w: ttl %s exceeds [leases] max_ttl %s", ErrInvalid, l.TTL, s.opts.Leases.MaxTTL)
	case req.Holder.PID <= 0:
		return fmt.Errorf("%w: holder pid must be above 0", ErrInvalid)
	}
	return nil
}

// feasible rejects requests no wait can satisfy: a pinned GPU that does not
// exist, or more memory than any allowed GPU could hold even when empty.
func (s *state) feasible(w *waiter) error {
	spec := w.lease.Device
	var largest int64
	found := false
	accts := s.accounts()
	if spec.Kind == device.Auto {
		found, largest = len(accts) > 0, s.maxUsable
	} else {
		s.eachAllowed(w, accts, func(a *Account) {
			found = true
			largest = max(largest, a.UsableBytes)
		})
	}
	if !found {
		return fmt.Errorf("%w: %s is not on this machine (%d GPUs)", ErrNoSuchGPU, spec, len(s.snap.GPUs))
	}
	if w.lease.Bytes > largest {
		return fmt.Errorf("%w: %s requested, the largest usable memory is %s", ErrTooLarge,
			units.FormatBytes(w.lease.Bytes), units.FormatBytes(largest))
	}
	return nil
}

func allowed(spec device.Spec, a *Account) bool {
	switch spec.Kind {
	case device.Index:
		return a.Index == spec.Index
	case device.UUID:
		return a.UUID == spec.UUID
	}
	return true
}

// grant turns a waiter into a granted lease on acc's GPU. The decision
// takes effect at once; the answer goes out once the lease is durable (group
// commit). A failed commit takes the grant back and answers the error.
func (s *state) grant(w *waiter, acc Account) {
	l := w.lease
	now := s.now()
	l.State, l.GPU, l.GPUIndex, l.GPUName, l.GPUTotalBytes = StateGranted, acc.UUID, acc.Index, acc.Name, acc.TotalBytes
	l.Granted, l.Expires = now, now.Add(l.TTL)
	s.removeWaiter(w)
	s.addLease(l)
	if s.log.Enabled(s.ctx, slog.LevelDebug) { // its arguments cost allocations on every grant
		s.log.Debug("granted", "lease", l.ID, "gpu", l.GPUIndex, "bytes", l.Bytes, "holder", l.Holder.PID)
	}
	s.emit(EventGranted, l, "")
	granted := l.clone()
	res := result{lease: granted}
	if s.journal != nil {
		later := s.later
		res.seq = s.record(Change{Put: &granted}, func(err error) {
			if err != nil {
				later(func(s *state) { s.unpersisted(w, err) })
			}
		})
	}
	s.answer(func() { w.reply <- res })
}

// unpersisted takes back a grant whose commit failed (its caller answers
// the error: see Engine.Acquire).
func (s *state) unpersisted(w *waiter, err error) {
	l := w.lease
	if cur, ok := s.leases[l.ID]; ok && cur == l {
		s.end(l, StateReleased, fmt.Sprintf("persist lease: %v", err))
		s.dispatch()
	}
}

// reject ends a request with err.
func (s *state) reject(w *waiter, err error) {
	s.removeWaiter(w)
	l := w.lease
	l.State, l.Reason, l.Ended = StateRejected, err.Error(), s.now()
	s.remember(l)
	s.emit(EventRejected, l, l.Reason)
	res := result{lease: l.clone(), err: err}
	s.answer(func() { w.reply <- res })
}

// end finishes a granted lease as released or expired.
func (s *state) end(l *Lease, st State, reason string) {
	s.dropLease(l)
	if s.journal != nil {
		id, log := l.ID, s.log
		s.record(Change{Delete: id}, func(err error) {
			if err != nil {
				log.Error("lease ended but could not be removed from the store", "lease", id, "err", err)
			}
		})
	}
	if l.UsedBytes > 0 {
		s.stale = true // its memory shows as used until the next reading
	}
	l.State, l.Reason, l.Ended = st, reason, s.now()
	s.remember(l)
	ev := Event{Type: EventReleased, Reason: reason}
	if st == StateExpired {
		ev.Type = EventExpired
	}
	for _, pid := range append([]int{l.Holder.PID}, l.PIDs...) {
		if _, held := s.owners[pid]; !held && pid > 0 && !slices.Contains(ev.Unheld, pid) {
			ev.Unheld = append(ev.Unheld, pid)
		}
	}
	s.emitEvent(ev, l)
}

func (s *state) remember(l *Lease) {
	s.ended[l.ID] = l
	s.endedQ = append(s.endedQ, l.ID)
	if len(s.endedQ) > endedKeep {
		delete(s.ended, s.endedQ[0])
		s.endedQ = s.endedQ[1:]
	}
}
