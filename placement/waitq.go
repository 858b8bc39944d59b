package placement

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// queue holds the waiting requests indexed for dispatch: one list per
// priority class in arrival order (aging only ever raises the older ones of
// a class, so each list stays in dispatch order and the lists merge), each
// with a segment tree of the smallest request below each node, so the
// waiters that could fit in some amount of memory are found without
// looking at the others.
type queue struct {
	classes [3]classQueue // by base priority: low, normal, high
	byID    map[string]*waiter
	// pub is the published set of queued requests (publish.go); changed
	// lists the waiters added or removed since it was last brought up to
	// date (a request granted in the step it arrived never touches it).
	pub     *tnode
	changed []*waiter
}

func newQueue() queue { return queue{byID: map[string]*waiter{}} }

func classOf(p Priority) int { return int(min(High, max(Low, p)) - Low) }

func (q *queue) len() int { return len(q.byID) }

func (q *queue) add(w *waiter) {
	q.byID[w.lease.ID] = w
	q.classes[classOf(w.lease.Priority)].push(w)
	q.changed = append(q.changed, w)
}

func (q *queue) remove(w *waiter) {
	if q.byID[w.lease.ID] != w {
		return
	}
	delete(q.byID, w.lease.ID)
	q.classes[classOf(w.lease.Priority)].remove(w)
	q.changed = append(q.changed, w)
}

// published brings the published set up to date and returns it.
func (q *queue) published() *tnode {
	for _, w := range q.changed {
		switch queued := q.byID[w.lease.ID] == w; {
		case queued && w.key == "":
			w.key = fmt.Sprintf("%020d", w.seq) // arrival order among equal times
			q.pub = tput(q.pub, w.lease.Created, w.key, snapshot(w.lease))
		case !queued && w.key != "":
			q.pub = tdel(q.pub, w.lease.Created, w.key)
			w.key = ""
		}
	}
	q.changed = q.changed[:0]
	return q.pub
}

// all returns every waiter, class by class.
func (q *queue) all() []*waiter {
	out := make([]*waiter, 0, q.len())
	for c := range q.classes {
		for _, w := range q.classes[c].ws {
			if w != nil {
				out = append(out, w)
			}
		}
	}
	return out
}

// classQueue is one priority class: waiters in arrival order (nil where
// one left) over a segment tree of minimum request sizes.
type classQueue struct {
	ws    []*waiter
	mins  []int64 // mins[1] is the root; leaves at leaves+i
	live  int
	first int // no waiter before this index
}

func (c *classQueue) leaves() int { return len(c.mins) / 2 }

func (c *classQueue) push(w *waiter) {
	if len(c.ws) == c.leaves() {
		c.rebuild()
	}
	w.pos = len(c.ws)
	c.ws = append(c.ws, w)
	c.set(w.pos, w.lease.Bytes)
	c.live++
}

func (c *classQueue) remove(w *waiter) {
	if w.pos >= len(c.ws) || c.ws[w.pos] != w {
		return
	}
	c.ws[w.pos] = nil
	c.set(w.pos, math.MaxInt64)
	c.live--
	for c.first < len(c.ws) && c.ws[c.first] == nil {
		c.first++
	}
}

func (c *classQueue) set(i int, v int64) {
	n := c.leaves() + i
	c.mins[n] = v
	for n > 1 {
		n /= 2
		c.mins[n] = min(c.mins[2*n], c.mins[2*n+1])
	}
}

// rebuild drops the gaps and sizes the tree for twice the live waiters.
func (c *classQueue) rebuild() {
	ws := make([]*waiter, 0, c.live)
	for _, w := range c.ws {
		if w != nil {
			ws = append(ws, w)
		}
	}
	n := 16
	for n < 2*len(ws) {
		n *= 2
	}
	c.ws, c.first, c.mins = ws, 0, make([]int64, 2*n)
	for i := range c.mins {
		c.mins[i] = math.MaxInt64
	}
	for i, w := range ws {
		w.pos = i
		c.mins[n+i] = w.lease.Bytes
	}
	for i := n - 1; i >= 1; i-- {
		c.mins[i] = min(c.mins[2*i], c.mins[2*i+1])
	}
}

// candidates returns, in order, the waiters that may take part in a plan:
// those that arrived by cutoff (past the backfill window: they may hold
// memory) and the later ones no larger than room.
func (c *classQueue) candidates(cutoff time.Time, room int64, out []*waiter) []*waiter {
	i := c.first
	for ; i < len(c.ws); i++ {
		w := c.ws[i]
		if w == nil {
			continue
		}
		if w.lease.Created.After(cutoff) {
			break
		}
		out = append(out, w)
	}
	if room <= 0 || i >= len(c.ws) {
		return out
	}
	return c.fitting(1, 0, c.leaves(), i, room, out)
}

// fitting appends the waiters at index ≥ from of node's range [lo, hi)
// whose size is at most room.
func (c *classQueue) fitting(node, lo, hi, from int, room int64, out []*waiter) []*waiter {
	if hi <= from || c.mins[node] > room || lo >= len(c.ws) {
		return out
	}
	if hi-lo == 1 {
		return append(out, c.ws[lo])
	}
	mid := (lo + hi) / 2
	out = c.fitting(2*node, lo, mid, from, room, out)
	return c.fitting(2*node+1, mid, hi, from, room, out)
}

// merged puts the classes' candidate lists into dispatch order under f.
func (s *state) merged(lists [3][]*waiter, f *fairness) []*waiter {
	out := make([]*waiter, 0, len(lists[0])+len(lists[1])+len(lists[2]))
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.SortFunc(out, func(a, b *waiter) int { return f.compare(a.lease, b.lease, a.seq, b.seq) })
	return out
}
