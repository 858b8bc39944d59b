package placement

import "time"

// expiryItem is a lease deadline. Renewals push a new item; stale items are
// skipped when they surface (the lease's Expires no longer matches).
type expiryItem struct {
	id string
	at time.Time
}

// expiryHeap is a container/heap of deadlines, earliest first.
type expiryHeap []expiryItem

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryItem)) }
func (h *expiryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
