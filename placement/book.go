package placement

import (
	"cmp"
	"maps"
	"slices"

	"github.com/wsched/wsched/placement/inventory"
)

// book is one GPU's accounting kept as running sums, so that a grant,
// release or resize changes its Account in O(1) and a new reading in the
// number of processes and leases whose memory use changed.
//
// A lease none of whose processes appears in the reading is "plain": it
// realizes nothing and all of its bytes are unrealized. The others are
// "measured"; their attributed and unrealized memory is recomputed over the
// measured leases alone whenever one of them changes (a GPU has a few
// processes, so that set is small). Measured leases are taken in ID order,
// and a process's memory counts once, towards the first lease listing it.
type book struct {
	g    inventory.GPU
	used map[int]int64 // pid → bytes, from the reading

	leases map[*Lease]struct{}         // granted leases on this GPU
	byPID  map[int]map[*Lease]struct{} // pid → leases here that list it
	// measured holds the leases with a process in the reading.
	measured map[*Lease]struct{}

	leased     int64 // Σ bytes of the leases
	plain      int64 // Σ bytes of the plain leases
	attributed int64 // over the measured leases
	unrealized int64 // over the measured leases

	acct  Account
	valid bool

	idx       int    // position in the reading; −1 when not in it
	pub       *tnode // the published set of this GPU's leases (publish.go)
	dirtyAcct bool   // listed in state.acctDirty
	dirtyPub  bool   // listed in state.pubDirty
}

func newBook(g inventory.GPU) *book {
	b := &book{leases: map[*Lease]struct{}{}, byPID: map[int]map[*Lease]struct{}{}, measured: map[*Lease]struct{}{}}
	b.g, b.used = g, usedByPID(g)
	return b
}

func usedByPID(g inventory.GPU) map[int]int64 {
	used := make(map[int]int64, len(g.Processes))
	for _, p := range g.Processes {
		used[p.PID] += p.UsedBytes
	}
	return used
}

// account is the GPU's Account under cfg.
func (b *book) account(cfg Config) Account {
	if !b.valid {
		b.acct = accountFrom(b.g, cfg, b.leased, b.attributed, b.plain+b.unrealized)
		b.valid = true
	}
	return b.acct
}

// isMeasured reports whether one of l's processes is in the reading.
func (b *book) isMeasured(l *Lease) bool {
	if _, ok := b.used[l.Holder.PID]; ok {
		return true
	}
	for _, pid := range l.PIDs {
		if _, ok := b.used[pid]; ok {
			return true
		}
	}
	return false
}

// add counts a granted lease. Its bytes and PIDs must not change until
// remove: callers remove, change, add.
func (b *book) add(l *Lease) {
	b.leases[l] = struct{}{}
	b.leased += l.Bytes
	for _, pid := range uniquePIDs(l) {
		set := b.byPID[pid]
		if set == nil {
			set = map[*Lease]struct{}{}
			b.byPID[pid] = set
		}
		set[l] = struct{}{}
	}
	b.classify(l)
	b.valid = false
}

// remove stops counting a lease.
func (b *book) remove(l *Lease) {
	if _, ok := b.leases[l]; !ok {
		return
	}
	b.declassify(l)
	delete(b.leases, l)
	b.leased -= l.Bytes
	for _, pid := range uniquePIDs(l) {
		delete(b.byPID[pid], l)
		if len(b.byPID[pid]) == 0 {
			delete(b.byPID, pid)
		}
	}
	b.valid = false
}

func (b *book) classify(l *Lease) {
	if b.isMeasured(l) {
		b.measured[l] = struct{}{}
		b.remeasure()
		return
	}
	b.plain += l.Bytes
}

func (b *book) declassify(l *Lease) {
	if _, ok := b.measured[l]; ok {
		delete(b.measured, l)
		b.remeasure()
		return
	}
	b.plain -= l.Bytes
}

// remeasure recomputes attributed and unrealized over the measured leases.
func (b *book) remeasure() {
	b.attributed, b.unrealized = 0, 0
	if len(b.measured) == 0 {
		return
	}
	ls := slices.SortedFunc(maps.Keys(b.measured), func(x, y *Lease) int { return cmp.Compare(x.ID, y.ID) })
	claimed := map[int]bool{}
	for _, l := range ls {
		var realized int64
		for _, pid := range l.pids() {
			if !claimed[pid] {
				claimed[pid] = true
				realized += b.used[pid]
			}
		}
		b.attributed += realized
		b.unrealized += max(0, l.Bytes-realized)
	}
}

// setReading adopts a new reading of the GPU. Only the leases of processes
// whose memory use appeared, vanished or changed are looked at again.
func (b *book) setReading(g inventory.GPU) {
	used := usedByPID(g)
	b.g, b.valid = g, false
	if maps.Equal(used, b.used) {
		return
	}
	affected := map[*Lease]struct{}{}
	for pid, n := range used {
		if old, ok := b.used[pid]; !ok || old != n {
			maps.Copy(affected, b.byPID[pid])
		}
	}
	for pid := range b.used {
		if _, ok := used[pid]; !ok {
			maps.Copy(affected, b.byPID[pid])
		}
	}
	for l := range affected {
		if _, ok := b.measured[l]; ok {
			delete(b.measured, l)
		} else {
			b.plain -= l.Bytes
		}
	}
	b.used = used
	for l := range affected {
		if b.isMeasured(l) {
			b.measured[l] = struct{}{}
		} else {
			b.plain += l.Bytes
		}
	}
	b.remeasure()
}
