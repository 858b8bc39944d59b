package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// checkTreap fails unless t is ordered, a max-heap on prio and sized.
func checkTreap(t *testing.T, n *tnode) int {
	t.Helper()
	if n == nil {
		return 0
	}
	for _, k := range []*tnode{n.left, n.right} {
		if k != nil && k.prio > n.prio {
			t.Fatalf("heap order broken under %s", n.k2)
		}
	}
	if n.left != nil && tless(n.left, n.k1, n.k2) >= 0 || n.right != nil && tless(n.right, n.k1, n.k2) <= 0 {
		t.Fatalf("key order broken under %s", n.k2)
	}
	size := 1 + checkTreap(t, n.left) + checkTreap(t, n.right)
	if n.size != size {
		t.Fatalf("size %d under %s, want %d", n.size, n.k2, size)
	}
	return size
}

// TestTBuildMatchesTPut: a treap built at once from shuffled keys (some
// repeated) holds what the same keys put one by one hold, in order, and is
// a valid treap.
func TestTBuildMatchesTPut(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 10, 1000} {
		var put *tnode
		var nodes []*tnode
		prev := map[string]time.Time{}
		base := time.Unix(1_800_000_000, 0)
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("l-%d", rng.IntN(n+n/2+1))
			k1 := base.Add(time.Duration(rng.IntN(5)) * time.Second)
			l := &Lease{ID: id, Bytes: int64(i)}
			if old, ok := prev[id]; ok {
				put = tdel(put, old, id) // one key per ID, as the engine keeps it
			}
			prev[id] = k1
			for _, old := range nodes {
				if old.k2 == id {
					old.k2 = "" // superseded: drop from the build below
				}
			}
			put = tput(put, k1, id, l)
			nodes = append(nodes, &tnode{l: l, k1: k1, k2: id, prio: tprio(id), size: 1})
		}
		nodes = slices.DeleteFunc(nodes, func(x *tnode) bool { return x.k2 == "" })
		built := tbuild(nodes)
		checkTreap(t, built)
		want, got := tappend(put, nil), tappend(built, nil)
		if !slices.EqualFunc(want, got, func(a, b Lease) bool { return a.ID == b.ID && a.Bytes == b.Bytes }) {
			t.Fatalf("n=%d: built %d leases, put %d; they differ", n, len(got), len(want))
		}
	}
}

// TestTBuildLastWins: of nodes under the same key, tbuild keeps the last,
// as a second tput would.
func TestTBuildLastWins(t *testing.T) {
	k1 := time.Unix(1, 0)
	nodes := []*tnode{
		{l: &Lease{ID: "b", Bytes: 1}, k1: k1, k2: "b", prio: tprio("b"), size: 1},
		{l: &Lease{ID: "a"}, k1: k1, k2: "a", prio: tprio("a"), size: 1},
		{l: &Lease{ID: "b", Bytes: 2}, k1: k1, k2: "b", prio: tprio("b"), size: 1},
	}
	got := tappend(tbuild(nodes), nil)
	if len(got) != 2 || got[1].ID != "b" || got[1].Bytes != 2 {
		t.Fatalf("built %+v, want a and the second b", got)
	}
}
