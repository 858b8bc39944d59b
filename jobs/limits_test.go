package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/jobs/transcript"
	"github.com/wsched/wsched/placement"
)

func specOf(uid int) Spec {
	s := spec("tiny", placement.Normal)
	s.Owner = placement.Holder{UID: uid}
	return s
}

// TestOwnerLimitsAtomic: 40 concurrent submissions of one uid against
// active_jobs 8 admit exactly 8 (the check is in the owner loop, with the
// submission), the TCP token's own limits apply to uid −1, root has none,
// and the table's size is the configured max_jobs.
func TestOwnerLimitsAtomic(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	exec := &fakeExec{}
	for range 200 {
		exec.on("tiny", block(release))
	}
	r := startManager(t, Config{MaxJobs: 30, UIDLimits: OwnerLimits{Active: 8, Stored: 100},
		TokenLimits: OwnerLimits{Active: 3, Stored: 100}}, exec, nil)
	defer r.stop()
	ctx := context.Background()
	submitMany := func(uid, n int) (ok int, errs []error) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				_, err := r.m.Submit(ctx, specOf(uid))
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					ok++
				} else {
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		return ok, errs
	}
	if ok, errs := submitMany(1000, 40); ok != 8 || !errors.Is(errs[0], ErrLimit) {
		t.Fatalf("uid 1000: %d of 40 admitted (%v), want 8 and ErrLimit", ok, errs[0])
	}
	if ok, errs := submitMany(TokenUID, 10); ok != 3 || !errors.Is(errs[0], ErrLimit) {
		t.Fatalf("token: %d of 10 admitted (%v), want 3", ok, errs[0])
	}
	if ok, errs := submitMany(0, 40); ok != 19 || !errors.Is(errs[0], ErrQueueFull) {
		t.Fatalf("root: %d of 40 admitted, want 19 (table of 30 holds 11 already): %v", ok, errs)
	}
}

// TestDeleteFinished: Delete removes a finished job from the table and the
// store, freeing its owner's stored_jobs place; on a running job it
// cancels (deleted false) and a second Delete removes it.
func TestDeleteFinished(t *testing.T) {
	release := make(chan struct{})
	exec := &fakeExec{}
	exec.on("slow", block(release))
	r := startManager(t, Config{UIDLimits: OwnerLimits{Stored: 2}}, exec, nil)
	defer r.stop()
	ctx := context.Background()
	done, _ := r.m.Submit(ctx, specOf(1000))
	if j, _ := r.m.Wait(ctx, done.ID); j.State != Completed {
		t.Fatalf("job %s", j.State)
	}
	slow := specOf(1000)
	slow.Model = "slow"
	running, err := r.m.Submit(ctx, slow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.Submit(ctx, specOf(1000)); !errors.Is(err, ErrLimit) {
		t.Fatalf("third job of a uid with stored_jobs 2: %v, want ErrLimit", err)
	}
	j, deleted, err := r.m.Delete(ctx, done.ID)
	if err != nil || !deleted || j.State != Completed {
		t.Fatalf("Delete(completed) = %s, %v, %v", j.State, deleted, err)
	}
	if _, err := r.m.Get(ctx, done.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted job still there: %v", err)
	}
	if stored, _ := r.store.Jobs(); len(stored) != 1 || stored[0].ID != running.ID {
		t.Errorf("stored after the delete: %d jobs, want the running one alone", len(stored))
	}
	if _, _, err := r.m.Delete(ctx, done.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	if _, deleted, err := r.m.Delete(ctx, running.ID); deleted || err != nil {
		t.Fatalf("Delete(running): deleted %v, %v; want a cancel", deleted, err)
	}
	if j, _ := r.m.Wait(ctx, running.ID); j.State != Cancelled {
		t.Fatalf("running job after Delete: %s", j.State)
	}
	if _, deleted, err := r.m.Delete(ctx, running.ID); !deleted || err != nil {
		t.Fatalf("Delete(cancelled): deleted %v, %v", deleted, err)
	}
	for range 2 { // both places are free again
		if _, err := r.m.Submit(ctx, specOf(1000)); err != nil {
			t.Fatal(err)
		}
	}
}

// jsonJobs stores jobs as the daemon's store does: as JSON, failing on
// what JSON cannot carry (NaN, ±Inf).
type jsonJobs struct {
	memJobs
	mu   sync.Mutex
	errs []error
}

func (s *jsonJobs) PutJob(j Job) error {
	if _, err := json.Marshal(j); err != nil {
		s.mu.Lock()
		s.errs = append(s.errs, err)
		s.mu.Unlock()
		return err
	}
	return s.memJobs.PutJob(j)
}

// TestProgressNotANumber: progress NaN or ±Inf from an executor is dropped
// and the rest clamped, so the job stays storable and its JSON writable.
func TestProgressNotANumber(t *testing.T) {
	exec := &fakeExec{}
	gate := make(chan struct{})
	exec.on("nan", func(ctx context.Context, j Job, r Reporter) (transcript.Transcript, error) {
		r.Placed(Placement{})
		r.Processing()
		for _, p := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -3, 250} {
			r.Progress(p)
		}
		<-gate
		return succeed(ctx, j, r)
	})
	store := &jsonJobs{memJobs: memJobs{jobs: map[string]Job{}}}
	m := New(Config{}, exec, store, nil)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = m.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	j, err := m.Submit(ctx, spec("nan", placement.Normal))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := m.Get(ctx, j.ID)
		if got.Progress == 0 && time.Now().Before(deadline) { // until the reports arrived
			time.Sleep(time.Millisecond)
			continue
		}
		if _, err := json.Marshal(got); err != nil || got.Progress != 100 {
			t.Fatalf("job after NaN progress: progress %v, JSON: %v", got.Progress, err)
		}
		break
	}
	close(gate)
	if got, _ := m.Wait(ctx, j.ID); got.State != Completed {
		t.Fatalf("state %s", got.State)
	}
	list, _ := m.List(ctx)
	if _, err := json.Marshal(list); err != nil {
		t.Errorf("GET /v1/jobs body: %v", err)
	}
	if len(store.errs) > 0 {
		t.Errorf("the job could not be persisted: %v", store.errs)
	}
}
