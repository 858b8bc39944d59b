package upkeep

import (
	"slices"
	"testing"
	"time"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/placement"
)

// TestResizedLeaseTeachesNoPeak (issue 26): a lease that grew for more
// streams measured its peak at more streams than its estimate key is for,
// so its end teaches nothing; a lease of the same key that was not resized
// still teaches its peak (and, ending after it, proves the first was
// handled).
func TestResizedLeaseTeachesNoPeak(t *testing.T) {
	r := newRig(t)
	ctx, _ := r.start(t)
	key := estimator.Key{Backend: estimator.WhisperCpp, Model: "tiny", Precision: "f16", Beam: 1, Batch: 1}
	run := func(pid int, used int64, resize bool) {
		l, err := r.eng.Acquire(ctx, placement.Request{Bytes: 4 * GiB, Holder: placement.Holder{PID: pid}, EstimateKey: &key})
		if err != nil {
			t.Fatal(err)
		}
		if resize {
			if _, err := r.eng.Resize(ctx, l.ID, 6*GiB); err != nil {
				t.Fatal(err)
			}
			if _, err := r.eng.Resize(ctx, l.ID, 4*GiB); err != nil {
				t.Fatal(err)
			}
		}
		_ = r.sim.SetProcess(0, pid, "backend", used)
		if err := r.u.tick(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := r.eng.Release(ctx, l.ID, "done"); err != nil {
			t.Fatal(err)
		}
		r.sim.RemoveProcess(pid)
	}
	run(1, 5*GiB, true)
	run(1, 3*GiB, false)
	key.GPUModel = "Sim GPU"
	deadline := time.Now().Add(10 * time.Second)
	for {
		peaks, err := r.db.Peaks(key)
		if err == nil && len(peaks) > 0 {
			if !slices.Equal(peaks, []int64{3 * GiB}) {
				t.Fatalf("peaks %v, want only the unresized lease's 3 GiB", peaks)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("peaks for %s: %v, %v; want [3 GiB]", key, peaks, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
