package placement

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/wsched/wsched/internal/units"
)

// Borrowed memory (issue 27). Under the preload enforcement tier a holder
// may allocate past its lease, up to [enforcement] borrow more; its
// allocation cap reports when it does (ReportUsageAs). Memory it borrows is
// free memory no lease holds, and it shows as less free memory in the
// readings, so a waiting request may not fit because of it. After each
// dispatch, for every waiter that still does not fit on a GPU where the
// borrowed memory would make room, the engine asks enough borrowers to give
// it back — lowest priority first, then the most recently granted — with an
// EventReclaim that names a deadline ([enforcement] reclaim_grace). A
// borrower still borrowing after its deadline is stopped (Options.Signal,
// SIGTERM in the daemon). A report at or under the lease ends the borrowing.

// DefaultBorrowGrace is how long a borrower asked back has when
// Options.BorrowGrace is 0.
const DefaultBorrowGrace = 30 * time.Second

// borrowBook is the granted leases whose holders allocate past their size,
// and the deadlines of the reclaims asked of them.
type borrowBook struct {
	bytes map[string]int64     // lease → bytes over its size
	asked map[string]borrowAsk // lease → the reclaim asked of it
}

// borrowAsk is a reclaim asked of a borrower: for which waiter, and by when.
// An ask whose waiter is no longer queued (granted, withdrawn) lapses.
type borrowAsk struct {
	waiter   string
	deadline time.Time
}

// setBorrowed records what lease l's holder reported: used bytes in all.
func (s *state) setBorrowed(l *Lease, used int64) {
	b := &s.borrow
	if b.bytes == nil {
		b.bytes, b.asked = map[string]int64{}, map[string]borrowAsk{}
	}
	if used > l.Bytes {
		b.bytes[l.ID] = used - l.Bytes
		return
	}
	delete(b.bytes, l.ID)
	delete(b.asked, l.ID)
}

func (s *state) borrowGrace() time.Duration {
	if s.opts.BorrowGrace > 0 {
		return s.opts.BorrowGrace
	}
	return DefaultBorrowGrace
}

// reclaimBorrowed asks borrowers back for the waiters that do not fit, and
// stops those past their deadline.
func (s *state) reclaimBorrowed() {
	if len(s.borrow.bytes) == 0 || s.queue.len() == 0 {
		return
	}
	now := s.now()
	s.stopLateBorrowers(now)
	accounts := s.accounts()
	for _, w := range s.ordered(now) {
		if w.lease.State != StateQueued || s.covered[w] {
			continue
		}
		for i := range accounts {
			a := &accounts[i]
			need := w.lease.Bytes - a.AvailableBytes
			if !allowed(w.lease.Device, a) || !a.Placeable || need <= 0 {
				continue
			}
			if victims, ok := s.borrowers(a.UUID, need); ok {
				s.askBorrowers(victims, w, now)
				break
			}
		}
	}
}

// borrowers picks the leases on gpu that borrow, lowest priority first,
// then the most recently granted, until their borrowed bytes add up to
// need; false when all of them are not enough.
func (s *state) borrowers(gpu string, need int64) ([]*Lease, bool) {
	var cands []*Lease
	for id := range s.borrow.bytes {
		l, ok := s.leases[id]
		if !ok || !l.Active() {
			delete(s.borrow.bytes, id)
			delete(s.borrow.asked, id)
			continue
		}
		if l.GPU == gpu {
			cands = append(cands, l)
		}
	}
	slices.SortFunc(cands, func(a, b *Lease) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), b.Granted.Compare(a.Granted), cmp.Compare(a.ID, b.ID))
	})
	var got int64
	for i, l := range cands {
		got += s.borrow.bytes[l.ID]
		if got >= need {
			return cands[:i+1], true
		}
	}
	return nil, false
}

// waiting reports whether the request id still waits in the queue.
func (s *state) waiting(id string) bool {
	w := s.findWaiter(id)
	return w != nil && w.lease.State == StateQueued
}

// askBorrowers sends each victim not asked for a waiter still queued an
// EventReclaim with its deadline.
func (s *state) askBorrowers(victims []*Lease, w *waiter, now time.Time) {
	for _, v := range victims {
		if a, ok := s.borrow.asked[v.ID]; ok && s.waiting(a.waiter) {
			continue
		}
		deadline := now.Add(s.borrowGrace())
		s.borrow.asked[v.ID] = borrowAsk{waiter: w.lease.ID, deadline: deadline}
		reason := fmt.Sprintf("borrowing %s over its %s lease: %s requested by %s needs it; give it back by %s or be stopped",
			units.FormatBytes(s.borrow.bytes[v.ID]), units.FormatBytes(v.Bytes), units.FormatBytes(w.lease.Bytes),
			w.lease.ID, deadline.UTC().Format(time.RFC3339))
		s.log.Info("borrowed memory asked back", "lease", v.ID, "holder", v.Holder.PID, "reason", reason)
		s.emit(EventReclaim, v, reason)
	}
}

// stopLateBorrowers stops the holders still borrowing past their deadline
// for a waiter that still waits; asks whose waiter left lapse.
func (s *state) stopLateBorrowers(now time.Time) {
	for id, a := range s.borrow.asked {
		l, ok := s.leases[id]
		if !ok || !l.Active() {
			delete(s.borrow.asked, id)
			delete(s.borrow.bytes, id)
			continue
		}
		if !s.waiting(a.waiter) {
			delete(s.borrow.asked, id)
			continue
		}
		if now.Before(a.deadline) {
			continue
		}
		s.log.Warn("stopping a holder that kept borrowed memory past its deadline", "lease", id, "holder", l.Holder.PID,
			"borrowed", units.FormatBytes(s.borrow.bytes[id]))
		delete(s.borrow.asked, id)
		delete(s.borrow.bytes, id)
		if s.opts.Signal != nil {
			s.opts.Signal(l.Holder.PID)
		}
	}
}
