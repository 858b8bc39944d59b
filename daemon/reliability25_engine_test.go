package daemon

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/asuser"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

// relIssue25Engine adds the rows of issue 25 for per-uid holds, bytes, fair share and limits inside the engine (items 1, 11, 12).
func relIssue25Engine(rec *relRecorder) {
	rec.single("never-fitting pinned requests, one uid", "root at high after they waited and aged",
		"issue: 409/504 for everyone, free memory held", relNeverFits)
	rec.pair("8 large leases, one uid", "leases one uid gets of 8 × 11 GiB (8 GPUs × 12 GiB; after: [limits] bytes = 16GiB)", relBytes,
		func(b, a string) bool { return strings.HasPrefix(b, "8 of 8") && strings.HasPrefix(a, "1 of 8") })
	rec.single("300 leases at once, one uid", "granted against [limits] leases = 256 (connections uncapped)", "issue: 286 of 300", relLeasesAtOnce)
	rec.single("nobody's grant+release, 20k leases", "µs per cycle over the socket, next to root", "issue: root 145 µs, nobody 29.9 ms", relNobodyCost)
}

// relNeverFits: uid nobody pins a request to each of 2 GPUs, larger than
// usable − foreign there; once they waited past backfill_window and aged
// to high, root asks for 4 GiB at priority high.
func relNeverFits(t *testing.T) (string, bool) {
	td, dir := asNobody(t, func(c *config.Config) {
		shipped(c)
		c.Inventory.Sim = []inventory.SimGPU{{Name: "Sim GPU", Memory: units.Bytes(16 * GiB)}, {Name: "Sim GPU", Memory: units.Bytes(16 * GiB)}}
		c.Leases.BackfillWindow = units.Duration(200 * time.Millisecond)
		c.Leases.Aging = units.Duration(300 * time.Millisecond)
	})
	for i := range 2 {
		if err := td.sim.SetProcess(i, 70000+i, "foreign", 6*GiB); err != nil {
			t.Fatal(err)
		}
	}
	engWaitFor(t, "the foreign memory read", func() bool {
		v := td.d.eng.View()
		return len(v.GPUs) == 2 && v.GPUs[0].ForeignBytes > 0 && v.GPUs[1].ForeignBytes > 0
	})
	var wg sync.WaitGroup
	answers := make([]string, 2)
	for i := range 2 {
		body := fmt.Sprintf(`{"memory_bytes": %d, "device": "cuda:%d", "wait_seconds": 3}`, 12*GiB, i)
		wg.Go(func() { answers[i] = runAsNobody(t, dir, td.socket, "/v1/leases", 1, body, true) })
		engWaitFor(t, "nobody's request queued", func() bool { return len(td.d.eng.View().Queue) == i+1 })
	}
	time.Sleep(time.Second) // past backfill_window, aged past normal to high
	status, body := td.raw("POST", "/v1/leases", fmt.Sprintf(`{"memory_bytes": %d, "priority": "high"}`, 4*GiB))
	held := td.d.eng.Summary().HeldBytes
	wg.Wait()
	return fmt.Sprintf("root %d, %s held (nobody: %s)", status, units.FormatBytes(held), strings.Join(answers, " ")),
		status == http.StatusCreated && held == 0 && !strings.Contains(body, `"error"`)
}

// relBytes: uid nobody asks for 8 leases of 11 GiB on 8 GPUs of 12 GiB.
func relBytes(t *testing.T, mod func(*config.Config)) (string, bool) {
	td, dir := asNobody(t, func(c *config.Config) {
		mod(c)
		c.Inventory.Sim = nil
		for range 8 {
			c.Inventory.Sim = append(c.Inventory.Sim, inventory.SimGPU{Name: "Sim GPU", Memory: units.Bytes(12 * GiB)})
		}
		if c.Limits != (config.Limits{}) { // the protection on: a byte limit set
			c.Limits.Bytes = units.Bytes(16 * GiB)
		}
	})
	got := runAsNobody(t, dir, td.socket, "/v1/leases", 8, fmt.Sprintf(`{"memory_bytes": %d, "ttl_seconds": 3600}`, 11*GiB), false)
	granted := strings.Count(got, "201/")
	return fmt.Sprintf("%d of 8, %s granted", granted, units.FormatBytes(int64(granted)*11*GiB)), true
}

// relLeasesAtOnce: uid nobody sends 300 lease requests at once against
// [limits] leases = 256, its connections not capped (so all 300 reach the
// lease handler together).
func relLeasesAtOnce(t *testing.T) (string, bool) {
	td, dir := asNobody(t, func(c *config.Config) {
		shipped(c)
		c.Daemon.MaxConnectionsPerUID, c.Daemon.MaxConnections = 0, 0
	})
	got := runAsNobody(t, dir, td.socket, "/v1/leases", 300, `{"memory_bytes": 1048576, "ttl_seconds": 3600}`, true)
	granted, refused := strings.Count(got, "201/"), strings.Count(got, "429/limit_exceeded")
	return fmt.Sprintf("%d of 300 (%d refused 429)", granted, refused), granted == 256 && refused == 44
}

// relNobodyCost: grant+release cycles by root and by nobody, each a
// process of its own, on a daemon holding 20k leases: the median of 3
// rounds of 200 each. It passes unless nobody's cycle is 10× root's (the
// issue measured 206×; the goal, ≤ 1.2×, is BenchmarkLeaseNobodyVsRoot's).
func relNobodyCost(t *testing.T) (string, bool) {
	dir := asuser.Dir(t)
	d, socket, stop := benchDaemon(t, dir)
	defer stop()
	loadLeases(t, d.eng, 20_000)
	var root, nobody []float64
	for range 3 {
		root = append(root, cyclesAs(t, dir, socket, 200, false))
		nobody = append(nobody, cyclesAs(t, dir, socket, 200, true))
	}
	r, n := engMedian(root), engMedian(nobody)
	return fmt.Sprintf("root %.0f µs, nobody %.0f µs (%.2f×)", r/1e3, n/1e3, n/r), n < 10*r
}

func engMedian(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// waitFor polls cond for up to 10 s (a hang, not a timing assertion).
func engWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: gave up after 10 s", what)
		}
	}
}
