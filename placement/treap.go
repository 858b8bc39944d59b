package placement

import (
	"cmp"
	"slices"
	"time"
)

// tnode is a node of a persistent treap of lease copies: inserting or
// deleting copies only the O(log n) nodes on the path and shares the rest,
// so the owner loop can publish a new version of a set of leases in O(log n)
// while readers walk older versions. Nodes are never modified once built.
type tnode struct {
	l           *Lease    // an immutable copy
	k1          time.Time // order: k1, then k2
	k2          string
	prio        uint64
	left, right *tnode
	size        int
}

// tprio is the heap priority of a key: its FNV-1a hash, so the shape is
// random across keys yet the same for the same keys.
func tprio(k string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(k); i++ {
		h = (h ^ uint64(k[i])) * 1099511628211
	}
	return h
}

func tsize(t *tnode) int {
	if t == nil {
		return 0
	}
	return t.size
}

func tless(t *tnode, k1 time.Time, k2 string) int {
	return cmp.Or(t.k1.Compare(k1), cmp.Compare(t.k2, k2))
}

func withKids(t *tnode, left, right *tnode) *tnode {
	c := *t
	c.left, c.right = left, right
	c.size = 1 + tsize(left) + tsize(right)
	return &c
}

// tsplit splits t into the nodes ordered before (k1, k2) and the others.
func tsplit(t *tnode, k1 time.Time, k2 string) (*tnode, *tnode) {
	if t == nil {
		return nil, nil
	}
	if tless(t, k1, k2) < 0 {
		l, r := tsplit(t.right, k1, k2)
		return withKids(t, t.left, l), r
	}
	l, r := tsplit(t.left, k1, k2)
	return l, withKids(t, r, t.right)
}

func tmerge(a, b *tnode) *tnode {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		return withKids(a, a.left, tmerge(a.right, b))
	}
	return withKids(b, tmerge(a, b.left), b.right)
}

// tput returns t with l stored under (k1, k2), replacing what was there.
// l must not change afterwards.
func tput(t *tnode, k1 time.Time, k2 string, l *Lease) *tnode {
	t = tdel(t, k1, k2)
	n := &tnode{l: l, k1: k1, k2: k2, prio: tprio(k2), size: 1}
	a, b := tsplit(t, k1, k2)
	return tmerge(tmerge(a, n), b)
}

// tdel returns t without the node under (k1, k2).
func tdel(t *tnode, k1 time.Time, k2 string) *tnode {
	if t == nil {
		return nil
	}
	switch c := tless(t, k1, k2); {
	case c == 0:
		return tmerge(t.left, t.right)
	case c < 0:
		r := tdel(t.right, k1, k2)
		if r == t.right {
			return t
		}
		return withKids(t, t.left, r)
	default:
		l := tdel(t.left, k1, k2)
		if l == t.left {
			return t
		}
		return withKids(t, l, t.right)
	}
}

// tappend appends the leases of t in order to out.
func tappend(t *tnode, out []Lease) []Lease {
	if t == nil {
		return out
	}
	out = tappend(t.left, out)
	out = append(out, *t.l)
	return tappend(t.right, out)
}

// tbuild returns the treap of nodes (fresh, unshared, each of size 1) in
// O(n log n) for the sort and O(n) for the shape, where n inserts with tput
// cost a path copy each: a restart restoring 100k leases builds its sets
// this way. Of equal keys the last wins, as with tput.
func tbuild(nodes []*tnode) *tnode {
	slices.SortStableFunc(nodes, func(a, b *tnode) int { return tless(a, b.k1, b.k2) })
	var stack []*tnode // the right spine, priorities decreasing
	for i, n := range nodes {
		if i+1 < len(nodes) && tless(n, nodes[i+1].k1, nodes[i+1].k2) == 0 {
			continue
		}
		var last *tnode
		for len(stack) > 0 && stack[len(stack)-1].prio <= n.prio {
			last, stack = stack[len(stack)-1], stack[:len(stack)-1]
		}
		n.left = last
		if len(stack) > 0 {
			stack[len(stack)-1].right = n
		}
		stack = append(stack, n)
	}
	if len(stack) == 0 {
		return nil
	}
	root := stack[0]
	tsizes(root)
	return root
}

// tsizes sets the sizes of a freshly built treap.
func tsizes(t *tnode) int {
	if t == nil {
		return 0
	}
	t.size = 1 + tsizes(t.left) + tsizes(t.right)
	return t.size
}
