package placement

// gpuTree is a segment tree over the reading's GPUs that keeps, for every
// range, the GPU the spread policy would pick from it when nothing else is
// planned: the placeable one with the most available memory, then the
// lower utilization, then the higher index. Its root answers the spread
// pick for any request size in O(1) (the best GPU fits it or none does),
// and the most memory available anywhere; updating one GPU is O(log G).
type gpuTree struct {
	best  []int32 // best[1] is the root; leaves at n+i; −1: none
	n     int
	accts []Account
}

func (t *gpuTree) rebuild(accts []Account) {
	n := 1
	for n < len(accts) {
		n *= 2
	}
	t.n, t.accts = n, accts
	t.best = make([]int32, 2*n)
	for i := range t.best {
		t.best[i] = -1
	}
	for i := range accts {
		t.best[n+i] = t.leaf(i)
	}
	for i := n - 1; i >= 1; i-- {
		t.best[i] = t.better(t.best[2*i], t.best[2*i+1])
	}
}

// update recomputes after the account at i changed.
func (t *gpuTree) update(i int) {
	if i >= len(t.accts) || t.n == 0 {
		return
	}
	k := t.n + i
	t.best[k] = t.leaf(i)
	for k > 1 {
		k /= 2
		t.best[k] = t.better(t.best[2*k], t.best[2*k+1])
	}
}

func (t *gpuTree) leaf(i int) int32 {
	if a := &t.accts[i]; a.Placeable && a.AvailableBytes > 0 {
		return int32(i)
	}
	return -1
}

func (t *gpuTree) better(i, j int32) int32 {
	switch {
	case i < 0:
		return j
	case j < 0:
		return i
	}
	a, b := &t.accts[i], &t.accts[j]
	if better(PolicySpread, ScoreWeights{}, Normal, a, a.AvailableBytes, b, b.AvailableBytes) {
		return i
	}
	return j
}

// top returns the spread policy's pick over all GPUs, if any GPU is
// placeable with memory available.
func (t *gpuTree) top() (*Account, bool) {
	if len(t.best) < 2 || t.best[1] < 0 {
		return nil, false
	}
	return &t.accts[t.best[1]], true
}
