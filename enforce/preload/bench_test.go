package preload_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/wsched/wsched/enforce/preload"
)

// BenchmarkCapOverhead is the cap's cost per allocation: pairs of
// cuMemAlloc_v2 + cuMemFree_v2 on the fake driver, bare and under the
// library (with a limit never reached), side by side. The fake driver's own
// cost is a slot search, far below a real driver's (microseconds), so the
// ratio here overstates the overhead a real job sees.
func BenchmarkCapOverhead(b *testing.B) {
	k := buildKit(b)
	env := preload.Env(k.lib, "", 1<<40, 0, "")
	var bare, capped float64
	for i := 0; i < b.N; i++ {
		bare += pairNS(b, k, nil)
		capped += pairNS(b, k, env)
	}
	b.ReportMetric(bare/float64(b.N), "bare-ns/pair")
	b.ReportMetric(capped/float64(b.N), "capped-ns/pair")
	b.ReportMetric(capped/bare, "ratio")
}

func pairNS(b *testing.B, k kit, env map[string]string) float64 {
	b.Helper()
	out := k.run(b, env, "bench=200000")
	ns, err := strconv.ParseFloat(strings.TrimPrefix(out[0], "ns "), 64)
	if err != nil {
		b.Fatalf("bench run: %q %v", out, err)
	}
	return ns
}
