package placement

import (
	"github.com/wsched/wsched/placement/inventory"
)

// The ledger: every change to the granted leases goes through addLease,
// dropLease, change and republish, which keep the per-GPU books (running
// accounting sums), the expiry heap and the published lease sets in step,
// each in O(log n).

// addLease records a granted lease.
func (s *state) addLease(l *Lease) {
	s.leases[l.ID] = l
	s.expiry.set(l.ID, l.Expires)
	if l.Reclaimable {
		s.reclaimable[l.ID] = l
	}
	s.place(l)
}

// dropLease forgets a lease that ended.
func (s *state) dropLease(l *Lease) {
	delete(s.leases, l.ID)
	delete(s.reclaimable, l.ID)
	delete(s.measured, l)
	s.expiry.remove(l.ID)
	s.unplace(l)
}

// change applies f, which may change l's bytes or processes, and counts l
// again afterwards.
func (s *state) change(l *Lease, f func()) {
	s.unplace(l)
	f()
	s.place(l)
}

// republish publishes l again after a change that accounting does not see
// (expiry, measured use, reclaimable).
func (s *state) republish(l *Lease) {
	s.markChanged()
	if l.GPU == CPU {
		s.cpuPub = tput(s.cpuPub, l.Granted, l.ID, snapshot(l))
		return
	}
	b := s.book(l.GPU)
	b.pub = tput(b.pub, l.Granted, l.ID, snapshot(l))
	s.touch(b)
}

func (s *state) place(l *Lease) {
	s.markChanged()
	s.uidGranted(l, 1)
	for _, pid := range uniquePIDs(l) {
		set := s.owners[pid]
		if set == nil {
			set = map[*Lease]struct{}{}
			s.owners[pid] = set
		}
		set[l] = struct{}{}
	}
	if s.bulk != nil {
		s.bulk[l.GPU] = append(s.bulk[l.GPU], &tnode{l: snapshot(l), k1: l.Granted, k2: l.ID, prio: tprio(l.ID), size: 1})
	}
	if l.GPU == CPU {
		if s.bulk == nil {
			s.cpuPub = tput(s.cpuPub, l.Granted, l.ID, snapshot(l))
		}
		return
	}
	b := s.book(l.GPU)
	b.add(l)
	if s.bulk == nil {
		b.pub = tput(b.pub, l.Granted, l.ID, snapshot(l))
	}
	s.touch(b)
	s.gpuLeases++
}

// publishBulk ends a bulk placement: builds each set collected in s.bulk
// at once and merges it into what was published before.
func (s *state) publishBulk() {
	for gpu, nodes := range s.bulk {
		pub := &s.cpuPub
		if gpu != CPU {
			pub = &s.book(gpu).pub
		}
		if *pub == nil {
			*pub = tbuild(nodes)
			continue
		}
		for _, n := range nodes { // not at start-up: the sets are empty then
			*pub = tput(*pub, n.k1, n.k2, n.l)
		}
	}
	s.bulk = nil
}

func (s *state) unplace(l *Lease) {
	s.markChanged()
	s.uidGranted(l, -1)
	for _, pid := range uniquePIDs(l) {
		delete(s.owners[pid], l)
		if len(s.owners[pid]) == 0 {
			delete(s.owners, pid)
		}
	}
	if l.GPU == CPU {
		s.cpuPub = tdel(s.cpuPub, l.Granted, l.ID)
		return
	}
	b := s.book(l.GPU)
	b.remove(l)
	b.pub = tdel(b.pub, l.Granted, l.ID)
	s.touch(b)
	s.gpuLeases--
}

// book returns the book of a GPU, creating one for a GPU the reading does
// not list (a restored lease on a GPU that went away).
func (s *state) book(uuid string) *book {
	b := s.bookBy[uuid]
	if b == nil {
		b = newBook(inventory.GPU{UUID: uuid, Index: -1})
		b.idx = -1
		s.bookBy[uuid] = b
	}
	return b
}

// touch notes that b's account and published leases changed.
func (s *state) touch(b *book) {
	if !b.dirtyAcct {
		b.dirtyAcct = true
		s.acctDirty = append(s.acctDirty, b)
	}
	if !b.dirtyPub {
		b.dirtyPub = true
		s.pubDirty = append(s.pubDirty, b)
	}
}

// adopt takes a new reading: the books follow it and the leases are
// reconciled with what it measures.
func (s *state) adopt(snap inventory.Snapshot) {
	s.snap, s.haveSnap, s.stale = snap, true, false
	for _, b := range s.books {
		b.idx = -1
	}
	books := make([]*book, 0, len(snap.GPUs))
	for i, g := range snap.GPUs {
		b := s.bookBy[g.UUID]
		if b == nil {
			b = newBook(g)
			s.bookBy[g.UUID] = b
		} else {
			b.setReading(g)
		}
		b.idx = i
		books = append(books, b)
	}
	s.books, s.acct, s.acctAll, s.pubAll = books, make([]Account, len(books)), true, true
	s.byIndex = make(map[int]int, len(books))
	for i, g := range snap.GPUs {
		s.byIndex[g.Index] = i
	}
	s.markChanged()
	s.reconcile()
}

// accounts applies the accounting formula to every GPU of the reading, in
// its order. Only the GPUs whose leases or reading changed are computed
// again; callers must not modify the result.
func (s *state) accounts() []Account {
	cfg := s.opts.Placement
	if s.acctAll {
		s.acctAll = false
		for i, b := range s.books {
			s.acct[i] = b.account(cfg)
		}
		s.gtree.rebuild(s.acct)
		s.maxUsable, s.sumUsable = 0, 0
		for i := range s.acct {
			s.maxUsable = max(s.maxUsable, s.acct[i].UsableBytes)
			if s.acct[i].Placeable {
				s.sumUsable += s.acct[i].UsableBytes
			}
		}
	}
	for _, b := range s.acctDirty {
		b.dirtyAcct = false
		if b.idx >= 0 {
			s.acct[b.idx] = b.account(cfg)
			s.gtree.update(b.idx)
		}
	}
	s.acctDirty = s.acctDirty[:0]
	return s.acct
}

// accountOf returns the account of the GPU with the given UUID.
func (s *state) accountOf(uuid string) (*Account, bool) {
	b := s.bookBy[uuid]
	if b == nil || b.idx < 0 {
		return nil, false
	}
	return &s.accounts()[b.idx], true
}

// snapshot is an immutable copy of l to publish.
func snapshot(l *Lease) *Lease {
	c := l.clone()
	return &c
}
