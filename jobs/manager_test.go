package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsched/wsched/jobs/transcript"
	"github.com/wsched/wsched/placement"
)

// fakeExec scripts attempts: each call pops the next behaviour for the job's
// model (default: succeed at once).
type fakeExec struct {
	mu      sync.Mutex
	script  map[string][]func(ctx context.Context, j Job, r Reporter) (transcript.Transcript, error)
	started []string // job models, in start order
	jobs    []Job    // the job as each attempt saw it
}

func (f *fakeExec) on(model string, steps ...func(ctx context.Context, j Job, r Reporter) (transcript.Transcript, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.script == nil {
		f.script = map[string][]func(context.Context, Job, Reporter) (transcript.Transcript, error){}
	}
	f.script[model] = append(f.script[model], steps...)
}

func (f *fakeExec) Execute(ctx context.Context, j Job, r Reporter) (transcript.Transcript, error) {
	f.mu.Lock()
	f.started = append(f.started, j.Spec.Model)
	f.jobs = append(f.jobs, j)
	var step func(context.Context, Job, Reporter) (transcript.Transcript, error)
	if s := f.script[j.Spec.Model]; len(s) > 0 {
		step, f.script[j.Spec.Model] = s[0], s[1:]
	}
	f.mu.Unlock()
	if step == nil {
		step = succeed
	}
	return step(ctx, j, r)
}

func succeed(_ context.Context, _ Job, r Reporter) (transcript.Transcript, error) {
	r.Placed(Placement{Backend: "fake", GPUIndex: 1, GPUUUID: "GPU-x", LeaseID: "l-1", MemoryBytes: 1 << 30})
	r.Processing()
	r.Progress(50)
	r.Segment(transcript.Segment{Start: 0, End: time.Second, Text: "hello"})
	return transcript.Transcript{Language: "en", Text: "hello", Segments: []transcript.Segment{{End: time.Second, Text: "hello"}}}, nil
}

func fail(err error) func(context.Context, Job, Reporter) (transcript.Transcript, error) {
	return func(context.Context, Job, Reporter) (transcript.Transcript, error) {
		return transcript.Transcript{}, err
	}
}

// block waits until ctx ends or release is closed, then succeeds.
func block(release <-chan struct{}) func(context.Context, Job, Reporter) (transcript.Transcript, error) {
	return func(ctx context.Context, j Job, r Reporter) (transcript.Transcript, error) {
		r.Placed(Placement{GPUIndex: 0})
		select {
		case <-ctx.Done():
			return transcript.Transcript{}, ctx.Err()
		case <-release:
			return succeed(ctx, j, r)
		}
	}
}

type memJobs struct {
	mu   sync.Mutex
	jobs map[string]Job
}

func (m *memJobs) PutJob(j Job) error { m.mu.Lock(); defer m.mu.Unlock(); m.jobs[j.ID] = j; return nil }
func (m *memJobs) DeleteJob(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.jobs, id)
	return nil
}
func (m *memJobs) Jobs() ([]Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Job
	for _, j := range m.jobs {
		out = append(out, j)
	}
	return out, nil
}

type mrig struct {
	m      *Manager
	exec   *fakeExec
	store  *memJobs
	cancel context.CancelFunc
	done   chan struct{}
}

func startManager(t *testing.T, cfg Config, exec *fakeExec, store *memJobs) *mrig {
	t.Helper()
	if store == nil {
		store = &memJobs{jobs: map[string]Job{}}
	}
	r := &mrig{m: New(cfg, exec, store, nil), exec: exec, store: store, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { _ = r.m.Run(ctx); close(r.done) }()
	return r
}

func (r *mrig) stop() { r.cancel(); <-r.done }

func spec(model string, p placement.Priority) Spec {
	return Spec{AudioPath: "/audio.wav", Model: model, Priority: p}
}

func TestLifecycleInOrder(t *testing.T) {
	r := startManager(t, Config{}, &fakeExec{}, nil)
	defer r.stop()
	ctx := context.Background()
	release := make(chan struct{})
	r.exec.on("tiny", block(release))
	j, err := r.m.Submit(ctx, spec("tiny", placement.Normal))
	if err != nil {
		t.Fatal(err)
	}
	cur, events, stop, err := r.m.Subscribe(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	close(release)
	_ = cur
	var states []State
	var kinds []EventType
	for ev := range events {
		kinds = append(kinds, ev.Type)
		if ev.Type == EventState {
			states = append(states, ev.State)
		}
	}
	want := []State{Pending, Loading, Processing, Completed}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("states %v, want %v (events %v)", states, want, kinds)
	}
	got, _ := r.m.Get(ctx, j.ID)
	if got.Result == nil || got.Result.Text != "hello" || got.Attempts != 1 || got.GPUIndex != 1 || got.LeaseID != "l-1" || got.Progress != 100 {
		t.Errorf("finished job = %+v", got)
	}
	for _, s := range want {
		if got.Timings[s].Entered.IsZero() {
			t.Errorf("no timing for %s", s)
		}
	}
	if r.store.jobs[j.ID].State != Completed {
		t.Error("result not persisted")
	}
}

func TestRetries(t *testing.T) {
	r := startManager(t, Config{MaxRetries: 2}, &fakeExec{}, nil)
	defer r.stop()
	ctx := context.Background()
	r.exec.on("crash-once", fail(fmt.Errorf("backend died: %w", ErrRetryable)))
	r.exec.on("oom-once", fail(fmt.Errorf("CUDA: %w", ErrOutOfMemory)))
	r.exec.on("oom-needs", fail(NeedMemory(errors.New("CUDA: out of memory"), 5<<30)))
	r.exec.on("always-crash", fail(ErrRetryable), fail(ErrRetryable), fail(ErrRetryable), fail(ErrRetryable))
	r.exec.on("bad-audio", fail(errors.New("decode audio: not a WAV file")))
	tests := []struct {
		model    string
		state    State
		attempts int
		msg      string
	}{
		{"crash-once", Completed, 2, ""},
		{"oom-once", Completed, 2, ""},
		{"oom-needs", Completed, 2, ""},
		{"always-crash", Failed, 3, "retryable failure"},
		{"bad-audio", Failed, 1, "decode audio: not a WAV file"},
	}
	for _, tt := range tests {
		j, _ := r.m.Submit(ctx, spec(tt.model, placement.Normal))
		got, err := r.m.Wait(ctx, j.ID)
		if err != nil || got.State != tt.state || got.Attempts != tt.attempts || got.Error != tt.msg {
			t.Errorf("%s: %s after %d attempts, error %q (%v); want %s, %d, %q", tt.model, got.State, got.Attempts, got.Error, err, tt.state, tt.attempts, tt.msg)
		}
	}
	r.exec.mu.Lock()
	defer r.exec.mu.Unlock()
	for _, j := range r.exec.jobs {
		if j.Spec.Model == "oom-once" && j.Attempts == 2 && j.OOMFactor != 1.5 {
			t.Errorf("second attempt after OOM: factor %v, want 1.5", j.OOMFactor)
		}
		if j.Spec.Model == "oom-needs" && j.Attempts == 2 && (j.RetryBytes != 5<<30 || j.OOMFactor != 1.5) {
			t.Errorf("second attempt after an OOM that needs 5 GiB: retry_bytes %d, factor %v", j.RetryBytes, j.OOMFactor)
		}
	}
}

func TestCancel(t *testing.T) {
	r := startManager(t, Config{MaxActive: 1}, &fakeExec{}, nil)
	defer r.stop()
	ctx := context.Background()
	release := make(chan struct{})
	r.exec.on("running", block(release))
	running, _ := r.m.Submit(ctx, spec("running", placement.Normal))
	queued, _ := r.m.Submit(ctx, spec("queued", placement.High))
	waitState(t, r.m, running.ID, Loading)
	if j, err := r.m.Cancel(ctx, queued.ID); err != nil || j.State != Cancelled {
		t.Fatalf("cancel queued: %+v %v", j, err)
	}
	if j, err := r.m.Cancel(ctx, running.ID); err != nil {
		t.Fatalf("cancel running: %+v %v", j, err)
	}
	got, _ := r.m.Wait(ctx, running.ID)
	if got.State != Cancelled {
		t.Errorf("running job after cancel: %s", got.State)
	}
	if _, err := r.m.Cancel(ctx, running.ID); !errors.Is(err, ErrFinished) {
		t.Errorf("cancel twice: %v", err)
	}
	r.exec.mu.Lock()
	defer r.exec.mu.Unlock()
	for _, m := range r.exec.started {
		if m == "queued" {
			t.Error("a cancelled queued job started")
		}
	}
}

func waitState(t *testing.T, m *Manager, id string, s State) {
	t.Helper()
	for i := 0; ; i++ {
		j, _ := m.Get(context.Background(), id)
		if j.State == s {
			return
		}
		if i > 2000 {
			t.Fatalf("job %s never reached %s (is %s)", id, s, j.State)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPriorityOrder(t *testing.T) {
	r := startManager(t, Config{MaxActive: 1}, &fakeExec{}, nil)
	defer r.stop()
	ctx := context.Background()
	release := make(chan struct{})
	r.exec.on("first", block(release))
	first, _ := r.m.Submit(ctx, spec("first", placement.Normal))
	waitState(t, r.m, first.ID, Loading)
	low, _ := r.m.Submit(ctx, spec("low", placement.Low))
	high, _ := r.m.Submit(ctx, spec("high", placement.High))
	close(release)
	for _, id := range []string{first.ID, low.ID, high.ID} {
		if _, err := r.m.Wait(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	r.exec.mu.Lock()
	defer r.exec.mu.Unlock()
	if fmt.Sprint(r.exec.started) != "[first high low]" {
		t.Errorf("start order %v, want [first high low]", r.exec.started)
	}
}

func TestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startManager(t, Config{JobTimeout: time.Minute, MaxRetries: 3}, &fakeExec{}, nil)
		defer r.stop()
		r.exec.on("slow", block(make(chan struct{})))
		j, _ := r.m.Submit(context.Background(), spec("slow", placement.Normal))
		got, _ := r.m.Wait(context.Background(), j.ID)
		if got.State != Failed || got.Error != "job timed out after 1m0s ([jobs] timeout)" || got.Attempts != 1 {
			t.Errorf("timed out job: %s %q attempts %d", got.State, got.Error, got.Attempts)
		}
	})
}

// TestRestartResumes stops the manager with one job running and one queued;
// a new manager on the same store runs both. A graceful stop does not use
// up the interrupted attempt.
func TestRestartResumes(t *testing.T) {
	store := &memJobs{jobs: map[string]Job{}}
	exec := &fakeExec{}
	r := startManager(t, Config{MaxActive: 1, MaxRetries: 3}, exec, store)
	ctx := context.Background()
	exec.on("a", block(make(chan struct{})))
	a, _ := r.m.Submit(ctx, spec("a", placement.Normal))
	b, _ := r.m.Submit(ctx, spec("b", placement.Normal))
	waitState(t, r.m, a.ID, Loading)
	r.stop()
	if store.jobs[a.ID].State != Pending || store.jobs[a.ID].Attempts != 0 || store.jobs[b.ID].State != Pending {
		t.Fatalf("stored states: %s %s", store.jobs[a.ID].State, store.jobs[b.ID].State)
	}
	r2 := startManager(t, Config{MaxActive: 1, MaxRetries: 3}, exec, store)
	defer r2.stop()
	ga, _ := r2.m.Wait(ctx, a.ID)
	gb, _ := r2.m.Wait(ctx, b.ID)
	if ga.State != Completed || ga.Attempts != 1 || gb.State != Completed || gb.Attempts != 1 {
		t.Errorf("after restart: a %s/%d, b %s/%d", ga.State, ga.Attempts, gb.State, gb.Attempts)
	}
}

func TestResultTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		upload := filepath.Join(t.TempDir(), "upload.wav")
		_ = os.WriteFile(upload, []byte("RIFF"), 0o600)
		r := startManager(t, Config{ResultTTL: time.Hour}, &fakeExec{}, nil)
		defer r.stop()
		ctx := context.Background()
		s := spec("tiny", placement.Normal)
		s.AudioPath, s.Uploaded = upload, true
		j, _ := r.m.Submit(ctx, s)
		if _, err := r.m.Wait(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(59 * time.Minute)
		if _, err := r.m.Get(ctx, j.ID); err != nil {
			t.Fatalf("result gone before its TTL: %v", err)
		}
		time.Sleep(2 * time.Minute)
		if _, err := r.m.Get(ctx, j.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("result after TTL: %v", err)
		}
		if _, err := os.Stat(upload); !os.IsNotExist(err) {
			t.Errorf("uploaded audio not removed: %v", err)
		}
	})
}
