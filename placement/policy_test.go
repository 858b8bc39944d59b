package placement

import (
	"testing"
)

func acct(index int, avail int64, util, temp int) Account {
	return Account{Index: index, UUID: string(rune('a' + index)), TotalBytes: 24 * GiB, UsableBytes: 24 * GiB,
		AvailableBytes: avail, UtilizationPct: &util, TemperatureC: &temp, Placeable: true}
}

func TestPick(t *testing.T) {
	w := DefaultConfig().Score
	tests := []struct {
		name   string
		policy Policy
		accs   []Account
		need   int64
		want   int
	}{
		{"spread: most available", PolicySpread, []Account{acct(0, 10*GiB, 0, 40), acct(1, 20*GiB, 90, 40), acct(2, 5*GiB, 0, 40)}, GiB, 1},
		{"spread: tie by lower utilization", PolicySpread, []Account{acct(0, 10*GiB, 50, 40), acct(1, 10*GiB, 20, 40)}, GiB, 1},
		{"spread: tie by higher index keeps GPU 0 free", PolicySpread, []Account{acct(0, 10*GiB, 20, 40), acct(1, 10*GiB, 20, 40), acct(2, 10*GiB, 20, 40)}, GiB, 2},
		{"binpack: least that fits", PolicyBinpack, []Account{acct(0, 10*GiB, 0, 40), acct(1, 3*GiB, 0, 40), acct(2, GiB, 0, 40)}, 2 * GiB, 1},
		{"score: memory outweighs utilization", PolicyScore, []Account{acct(0, 20*GiB, 50, 40), acct(1, 4*GiB, 0, 40)}, GiB, 0},
		{"score: cool idle GPU wins on equal memory", PolicyScore, []Account{acct(0, 10*GiB, 80, 80), acct(1, 10*GiB, 10, 40)}, GiB, 1},
	}
	for _, tt := range tests {
		got, ok := Pick(tt.policy, w, tt.accs, tt.need, Normal)
		if !ok || got.Index != tt.want {
			t.Errorf("%s: picked %d (ok %v), want %d", tt.name, got.Index, ok, tt.want)
		}
	}
	unplaceable := acct(0, 20*GiB, 0, 40)
	unplaceable.Placeable = false
	if _, ok := Pick(PolicySpread, w, []Account{unplaceable, acct(1, GiB/2, 0, 40)}, GiB, Normal); ok {
		t.Error("picked an unplaceable GPU or one without room")
	}
}

// TestScoreMatchesSeed checks the weighted score against the seed's
// _calculate_gpu_score by hand: 0.4·ratio + 0.3·(1−util) + 0.2·headroom + 0.1·weight/3.
func TestScoreMatchesSeed(t *testing.T) {
	w := DefaultConfig().Score
	a := acct(0, 12*GiB, 30, 51)
	want := 0.4*0.5 + 0.3*0.7 + 0.2*(85.0-51)/85 + 0.1*3.0/3
	if got := Score(w, a, High); got < want-1e-9 || got > want+1e-9 {
		t.Errorf("Score = %v, want %v", got, want)
	}
}
