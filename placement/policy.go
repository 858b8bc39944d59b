package placement

import "cmp"

// Priority of a lease request.
type Priority int

// Priorities, lowest first. The zero value is Normal.
const (
	Low    Priority = -1
	Normal Priority = 0
	High   Priority = 1
)

// weight is the seed's PRIORITY_WEIGHTS: high 3, normal 2, low 1.
func (p Priority) weight() float64 { return float64(p + 2) }

// Pick chooses a GPU for a request of need bytes among accounts, by policy.
// Only placeable GPUs whose available memory is at least need (and above 0)
// qualify. ok is false when none does.
func Pick(policy Policy, w ScoreWeights, accounts []Account, need int64, prio Priority) (Account, bool) {
	var best *Account
	for i := range accounts {
		a := &accounts[i]
		if !a.Placeable || a.AvailableBytes < need || a.AvailableBytes <= 0 {
			continue
		}
		if best == nil || better(policy, w, prio, a, a.AvailableBytes, best, best.AvailableBytes) {
			best = a
		}
	}
	if best == nil {
		return Account{}, false
	}
	return *best, true
}

// better reports whether a (with avail bytes available) beats b (with
// bAvail) under policy: spread takes the most available memory, then the
// lower utilization, then the higher index (keeping GPU 0 free); binpack
// the least available memory, then the lower index; score the higher
// score, then the higher index.
func better(policy Policy, w ScoreWeights, prio Priority, a *Account, avail int64, b *Account, bAvail int64) bool {
	switch policy {
	case PolicyBinpack:
		return cmp.Or(cmp.Compare(avail, bAvail), cmp.Compare(a.Index, b.Index)) < 0
	case PolicyScore:
		return cmp.Or(cmp.Compare(score(w, a, avail, prio), score(w, b, bAvail, prio)), cmp.Compare(a.Index, b.Index)) > 0
	}
	return cmp.Or(
		cmp.Compare(avail, bAvail),
		cmp.Compare(util(b), util(a)),
		cmp.Compare(a.Index, b.Index),
	) > 0
}

func util(a *Account) int {
	if a.UtilizationPct == nil {
		return 0
	}
	return *a.UtilizationPct
}

// Score is the seed's weighted GPU score (003, _calculate_gpu_score):
// memory × available/total + utilization × (1 − util) + temperature ×
// max(0, (limit − temp)/limit) + priority × weight/3. The priority term is the
// same for every GPU of one request, so it never changes which GPU wins; it is
// kept so scores compare with the seed's. Unknown utilization or temperature
// score as 0 % and limit/2.
func Score(w ScoreWeights, a Account, prio Priority) float64 {
	return score(w, &a, a.AvailableBytes, prio)
}

func score(w ScoreWeights, a *Account, avail int64, prio Priority) float64 {
	var memRatio float64
	if a.TotalBytes > 0 {
		memRatio = float64(max(0, avail)) / float64(a.TotalBytes)
	}
	temp := float64(w.TemperatureLimit) / 2
	if a.TemperatureC != nil {
		temp = float64(*a.TemperatureC)
	}
	limit := float64(w.TemperatureLimit)
	return float64(w.Memory)*memRatio +
		float64(w.Utilization)*(1-float64(util(a))/100) +
		float64(w.Temperature)*max(0, (limit-temp)/limit) +
		float64(w.Priority)*prio.weight()/3
}
