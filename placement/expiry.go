package placement

import (
	"container/heap"
	"time"
)

// deadlines is an indexed min-heap of times by key: set inserts or moves a
// key, remove drops it, both O(log n); there are no stale entries. The
// engine keeps one for lease expiries and one for waiters' deadlines.
type deadlines[K comparable] struct {
	h dlHeap[K]
}

type dlItem[K comparable] struct {
	key K
	at  time.Time
}

type dlHeap[K comparable] struct {
	items []dlItem[K]
	pos   map[K]int
}

func (h *dlHeap[K]) Len() int           { return len(h.items) }
func (h *dlHeap[K]) Less(i, j int) bool { return h.items[i].at.Before(h.items[j].at) }
func (h *dlHeap[K]) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.pos[h.items[i].key], h.pos[h.items[j].key] = i, j
}
func (h *dlHeap[K]) Push(x any) {
	it := x.(dlItem[K])
	h.pos[it.key] = len(h.items)
	h.items = append(h.items, it)
}
func (h *dlHeap[K]) Pop() any {
	it := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	delete(h.pos, it.key)
	return it
}

// set schedules key at t, replacing its earlier time.
func (d *deadlines[K]) set(key K, t time.Time) {
	if d.h.pos == nil {
		d.h.pos = map[K]int{}
	}
	if i, ok := d.h.pos[key]; ok {
		d.h.items[i].at = t
		heap.Fix(&d.h, i)
		return
	}
	heap.Push(&d.h, dlItem[K]{key: key, at: t})
}

// remove unschedules key.
func (d *deadlines[K]) remove(key K) {
	if i, ok := d.h.pos[key]; ok {
		heap.Remove(&d.h, i)
	}
}

// next returns the earliest key and its time.
func (d *deadlines[K]) next() (K, time.Time, bool) {
	if len(d.h.items) == 0 {
		var zero K
		return zero, time.Time{}, false
	}
	it := d.h.items[0]
	return it.key, it.at, true
}

func (d *deadlines[K]) len() int { return len(d.h.items) }
