package jobs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/jobs/chunk"
	"github.com/wsched/wsched/jobs/transcript"
	"github.com/wsched/wsched/placement"
)

// fakeSplitter cuts every job into n equal windows of fake files.
type fakeSplitter struct {
	n       int
	mu      sync.Mutex
	cleaned []string
}

func (f *fakeSplitter) Split(_ context.Context, job Job, _ time.Duration) ([]ChunkFile, error) {
	total := time.Duration(job.AudioSeconds * float64(time.Second))
	var out []ChunkFile
	for i := range f.n {
		w := chunk.Window{Index: i, Start: total * time.Duration(i) / time.Duration(f.n), End: total * time.Duration(i+1) / time.Duration(f.n)}
		out = append(out, ChunkFile{Window: w, Path: fmt.Sprintf("/chunks/%s%s/%d", job.ID, strings.TrimSuffix(job.Spec.AudioPath, ".wav"), i)})
	}
	return out, nil
}

func (f *fakeSplitter) Clean(job Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleaned = append(f.cleaned, job.ID)
}

func (f *fakeSplitter) cleanedIDs() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.cleaned, ",")
}

// chunkExec runs attempts by audio path: step(path, attempt) decides; it
// records the start order and the attempts running at once.
type chunkExec struct {
	step    func(ctx context.Context, path string, attempt int, r Reporter) (transcript.Transcript, error)
	mu      sync.Mutex
	order   []string
	tries   map[string]int
	running int
	peak    int
}

func (c *chunkExec) Execute(ctx context.Context, j Job, r Reporter) (transcript.Transcript, error) {
	c.mu.Lock()
	if c.tries == nil {
		c.tries = map[string]int{}
	}
	c.tries[j.Spec.AudioPath]++
	attempt := c.tries[j.Spec.AudioPath]
	c.order = append(c.order, j.Spec.AudioPath)
	c.running++
	c.peak = max(c.peak, c.running)
	c.mu.Unlock()
	defer func() { c.mu.Lock(); c.running--; c.mu.Unlock() }()
	r.Placed(Placement{Backend: "fake", GPUIndex: len(j.Spec.AudioPath) % 2, LeaseID: "l-" + j.ID})
	r.Processing()
	return c.step(ctx, j.Spec.AudioPath, attempt, r)
}

func (c *chunkExec) started() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.order...)
}

// oneSegment answers a chunk with one segment at 1–2 s naming its file.
func oneSegment(path string) transcript.Transcript {
	name := path[strings.LastIndex(path, "/")+1:]
	return transcript.Transcript{Language: "en", Text: "part " + name,
		Segments: []transcript.Segment{{Start: time.Second, End: 2 * time.Second, Text: "part " + name}}}
}

func chunkManager(t *testing.T, cfg Config, n int, exec *chunkExec) (*mrig, *fakeSplitter) {
	t.Helper()
	sp := &fakeSplitter{n: n}
	cfg.Splitter, cfg.ChunkOver = sp, time.Minute
	cfg.Probe = func(_ context.Context, path string) (float64, error) {
		if strings.Contains(path, "long") {
			return 100, nil
		}
		return 5, nil
	}
	r := &mrig{m: New(cfg, exec, &memJobs{jobs: map[string]Job{}}, nil), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { _ = r.m.Run(ctx); close(r.done) }()
	t.Cleanup(r.stop)
	return r, sp
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for i := 0; !ok(); i++ {
		if i > 2000 {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestChunkedJobRunsInParallelAndStitches: a 100 s job over chunk_over runs
// as four 25 s chunks at once; the result has the recording's timestamps,
// the progress counts audio done, and the chunk files are removed.
func TestChunkedJobRunsInParallelAndStitches(t *testing.T) {
	release := make(chan struct{})
	exec := &chunkExec{step: func(ctx context.Context, path string, _ int, r Reporter) (transcript.Transcript, error) {
		if strings.HasSuffix(path, "/0") {
			r.Progress(100)
			return oneSegment(path), nil
		}
		select {
		case <-release:
		case <-ctx.Done():
			return transcript.Transcript{}, ctx.Err()
		}
		r.Segment(transcript.Segment{Start: time.Second, End: 2 * time.Second, Text: "live"})
		return oneSegment(path), nil
	}}
	r, sp := chunkManager(t, Config{MaxActive: 8}, 4, exec)
	ctx := waitCtx(t)
	j, err := r.m.Submit(ctx, spec("tiny", placement.Normal))
	if err == nil {
		j, err = r.m.Submit(ctx, Spec{AudioPath: "/long.wav", Model: "tiny"})
	}
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "chunk 0 done and three running", func() bool {
		g, _ := r.m.Get(ctx, j.ID)
		return g.Chunks != nil && g.Chunks.Done == 1 && g.Chunks.Running == 3
	})
	if g, _ := r.m.Get(ctx, j.ID); g.Progress != 25 || g.State != Processing || g.Chunks.Total != 4 {
		t.Errorf("after one of four chunks: progress %v, state %s, chunks %+v; want 25, processing, 4", g.Progress, g.State, g.Chunks)
	}
	_, events, stop, err := r.m.Subscribe(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	close(release)
	var live []time.Duration
	for ev := range events {
		if ev.Type == EventSegment {
			live = append(live, ev.Segment.Start)
		}
	}
	got, err := r.m.Wait(ctx, j.ID)
	if err != nil || got.State != Completed || got.Result == nil {
		t.Fatalf("job %s (%v): %+v", got.State, err, got)
	}
	var starts []string
	for _, s := range got.Result.Segments {
		starts = append(starts, fmt.Sprintf("%d:%s", s.ID, s.Start))
	}
	if strings.Join(starts, " ") != "0:1s 1:26s 2:51s 3:1m16s" || got.Result.Text != "part 0 part 1 part 2 part 3" || got.Result.Duration != 100*time.Second {
		t.Errorf("stitched %v, text %q, duration %s", starts, got.Result.Text, got.Result.Duration)
	}
	if len(live) != 3 || live[0]%(25*time.Second) != time.Second || live[0] < 25*time.Second {
		t.Errorf("live segment starts %v: want three, each 1 s into its chunk's window", live)
	}
	if got.Chunks.Done != 4 || got.Chunks.Running != 0 || got.Progress != 100 || got.Attempts != 1 {
		t.Errorf("chunks %+v, progress %v, attempts %d", got.Chunks, got.Progress, got.Attempts)
	}
	if exec.peak < 4 {
		t.Errorf("at most %d attempts ran at once: want the short job's or the four chunks together", exec.peak)
	}
	waitFor(t, "chunk files removed", func() bool { return sp.cleanedIDs() == j.ID })
}

// TestChunkRetriesThenFails: a chunk that crashes once is retried and the
// job completes; a chunk that always crashes fails the job after the
// retries, its other chunks are cancelled or dropped.
func TestChunkRetriesThenFails(t *testing.T) {
	exec := &chunkExec{step: func(ctx context.Context, path string, attempt int, _ Reporter) (transcript.Transcript, error) {
		switch {
		case strings.Contains(path, "-once") && strings.HasSuffix(path, "/2") && attempt == 1:
			return transcript.Transcript{}, fmt.Errorf("backend died: %w", ErrRetryable)
		case strings.Contains(path, "-never") && strings.HasSuffix(path, "/1"):
			return transcript.Transcript{}, fmt.Errorf("backend died: %w", ErrRetryable)
		case strings.Contains(path, "-never"):
			<-ctx.Done() // the others wait: the failure must cancel them
			return transcript.Transcript{}, ctx.Err()
		}
		return oneSegment(path), nil
	}}
	r, sp := chunkManager(t, Config{MaxActive: 8, MaxRetries: 2}, 4, exec)
	ctx := waitCtx(t)
	once, _ := r.m.Submit(ctx, Spec{AudioPath: "/long-once.wav", Model: "tiny"})
	never, _ := r.m.Submit(ctx, Spec{AudioPath: "/long-never.wav", Model: "tiny"})
	a, errA := r.m.Wait(ctx, once.ID)
	b, errB := r.m.Wait(ctx, never.ID)
	if errA != nil || a.State != Completed || len(a.Result.Segments) != 4 {
		t.Errorf("crash-once job: %s (%v) %+v", a.State, errA, a.Result)
	}
	if errB != nil || b.State != Failed || !strings.Contains(b.Error, "chunk 1") || !strings.Contains(b.Error, "after 3 attempt(s)") || b.ErrorKind != "backend" {
		t.Errorf("always-crash job: %s (%v) error %q kind %q", b.State, errB, b.Error, b.ErrorKind)
	}
	exec.mu.Lock()
	tries := exec.tries[fmt.Sprintf("/chunks/%s/long-once/2", once.ID)]
	failing := exec.tries[fmt.Sprintf("/chunks/%s/long-never/1", never.ID)]
	exec.mu.Unlock()
	if tries != 2 || failing != 3 {
		t.Errorf("attempts: crash-once chunk %d (want 2), always-crash chunk %d (want 3 = 1 + max_retries)", tries, failing)
	}
	waitFor(t, "both jobs' chunk files removed", func() bool {
		c := sp.cleanedIDs()
		return strings.Contains(c, once.ID) && strings.Contains(c, never.ID)
	})
}

// TestChunkedJobYieldsToHigherPriority: with one job at a time, a high
// priority job that arrives while a long job's first chunk runs goes before
// the long job's other chunks.
func TestChunkedJobYieldsToHigherPriority(t *testing.T) {
	gate := make(chan struct{})
	exec := &chunkExec{step: func(ctx context.Context, path string, _ int, _ Reporter) (transcript.Transcript, error) {
		if strings.HasSuffix(path, "/0") {
			select {
			case <-gate:
			case <-ctx.Done():
				return transcript.Transcript{}, ctx.Err()
			}
		}
		return oneSegment(path), nil
	}}
	r, _ := chunkManager(t, Config{MaxActive: 1}, 4, exec)
	ctx := waitCtx(t)
	long, _ := r.m.Submit(ctx, Spec{AudioPath: "/long.wav", Model: "tiny", Priority: placement.Low})
	waitFor(t, "the first chunk", func() bool { return len(exec.started()) == 1 })
	high, _ := r.m.Submit(ctx, Spec{AudioPath: "/clip.wav", Model: "tiny", Priority: placement.High})
	close(gate)
	if h, err := r.m.Wait(ctx, high.ID); err != nil || h.State != Completed {
		t.Fatalf("high job %s (%v)", h.State, err)
	}
	if l, err := r.m.Wait(ctx, long.ID); err != nil || l.State != Completed {
		t.Fatalf("long job %s (%v)", l.State, err)
	}
	got := strings.Join(exec.started(), " ")
	want := fmt.Sprintf("/chunks/%[1]s/long/0 /clip.wav /chunks/%[1]s/long/1 /chunks/%[1]s/long/2 /chunks/%[1]s/long/3", long.ID)
	if got != want {
		t.Errorf("start order\n %s\nwant\n %s", got, want)
	}
}

// TestCancelChunkedJob: cancelling a chunked job cancels its running chunks
// and its queued ones never start.
func TestCancelChunkedJob(t *testing.T) {
	var mu sync.Mutex
	var cancelled int
	exec := &chunkExec{step: func(ctx context.Context, _ string, _ int, _ Reporter) (transcript.Transcript, error) {
		<-ctx.Done()
		mu.Lock()
		cancelled++
		mu.Unlock()
		return transcript.Transcript{}, ctx.Err()
	}}
	r, sp := chunkManager(t, Config{MaxActive: 2}, 5, exec)
	ctx := waitCtx(t)
	j, _ := r.m.Submit(ctx, Spec{AudioPath: "/long.wav", Model: "tiny"})
	waitFor(t, "two chunks running", func() bool { return len(exec.started()) == 2 })
	if _, err := r.m.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	got, err := r.m.Wait(ctx, j.ID)
	if err != nil || got.State != Cancelled || got.ErrorKind != "cancelled" {
		t.Fatalf("job %s (%v) %+v", got.State, err, got)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(exec.started()); n != 2 || cancelled != 2 {
		t.Errorf("%d chunks started, %d cancelled: want 2 and 2", n, cancelled)
	}
	if sp.cleanedIDs() != j.ID {
		t.Errorf("cleaned %q", sp.cleanedIDs())
	}
}

// TestShortJobsAreNotCut: audio not over chunk_over runs whole.
func TestShortJobsAreNotCut(t *testing.T) {
	exec := &chunkExec{step: func(_ context.Context, path string, _ int, _ Reporter) (transcript.Transcript, error) {
		return oneSegment(path), nil
	}}
	r, _ := chunkManager(t, Config{}, 4, exec)
	ctx := waitCtx(t)
	j, _ := r.m.Submit(ctx, Spec{AudioPath: "/clip.wav", Model: "tiny"})
	got, err := r.m.Wait(ctx, j.ID)
	if err != nil || got.State != Completed || got.Chunks != nil || strings.Join(exec.started(), " ") != "/clip.wav" {
		t.Errorf("job %s (%v), chunks %+v, started %v", got.State, err, got.Chunks, exec.started())
	}
}

// gateExec places the clip only when placeClip closes (it waits for
// memory until then); chunks are placed at once and finish.
type gateExec struct {
	placeClip chan struct{}
	mu        sync.Mutex
	placed    []string
}

func (g *gateExec) Execute(ctx context.Context, j Job, r Reporter) (transcript.Transcript, error) {
	if j.Spec.AudioPath == "/clip.wav" {
		select {
		case <-g.placeClip:
		case <-ctx.Done():
			return transcript.Transcript{}, ctx.Err()
		}
	}
	g.mu.Lock()
	g.placed = append(g.placed, j.Spec.AudioPath)
	g.mu.Unlock()
	r.Placed(Placement{GPUIndex: 0})
	return oneSegment(j.Spec.AudioPath), nil
}

func (g *gateExec) order() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.placed...)
}

// TestChunksWaitForHigherPriorityPlacement: while a job of higher priority
// waits for its placement, a long job's chunks are not dispatched (the
// executor's waiters need not be served by priority), although slots are
// free; once it is placed they run.
func TestChunksWaitForHigherPriorityPlacement(t *testing.T) {
	exec := &gateExec{placeClip: make(chan struct{})}
	sp := &fakeSplitter{n: 3}
	cfg := Config{MaxActive: 8, Splitter: sp, ChunkOver: time.Minute, Probe: func(_ context.Context, path string) (float64, error) {
		if strings.Contains(path, "long") {
			return 100, nil
		}
		return 5, nil
	}}
	r := &mrig{m: New(cfg, exec, &memJobs{jobs: map[string]Job{}}, nil), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { _ = r.m.Run(ctx); close(r.done) }()
	t.Cleanup(r.stop)
	wctx := waitCtx(t)
	clip, _ := r.m.Submit(wctx, Spec{AudioPath: "/clip.wav", Model: "tiny", Priority: placement.High})
	long, _ := r.m.Submit(wctx, Spec{AudioPath: "/long.wav", Model: "tiny", Priority: placement.Low})
	waitFor(t, "the long job cut", func() bool {
		g, _ := r.m.Get(wctx, long.ID)
		return g.Chunks != nil
	})
	time.Sleep(50 * time.Millisecond) // room for a wrong dispatch to show
	if got := exec.order(); len(got) != 0 {
		t.Fatalf("placed %v while the high-priority clip waited for memory", got)
	}
	close(exec.placeClip)
	for _, id := range []string{clip.ID, long.ID} {
		if j, err := r.m.Wait(wctx, id); err != nil || j.State != Completed {
			t.Fatalf("job %s: %s (%v)", id, j.State, err)
		}
	}
	if got := exec.order(); len(got) != 4 || got[0] != "/clip.wav" {
		t.Errorf("placement order %v: want the clip, then three chunks", got)
	}
}

// TestChunkedJobLiveSegments: the live segment events of a chunked job,
// whose chunks each number their segments from 0 and finish in any order,
// carry IDs unique and increasing in arrival order, and their times stay
// within the chunk's window (as the stitched result's do).
func TestChunkedJobLiveSegments(t *testing.T) {
	turns := map[string]chan struct{}{}
	for i := range 4 {
		turns[fmt.Sprint(i)] = make(chan struct{})
	}
	exec := &chunkExec{step: func(ctx context.Context, path string, _ int, r Reporter) (transcript.Transcript, error) {
		select {
		case <-turns[path[strings.LastIndex(path, "/")+1:]]:
		case <-ctx.Done():
			return transcript.Transcript{}, ctx.Err()
		}
		r.Segment(transcript.Segment{ID: 0, Start: time.Second, End: 2 * time.Second, Text: "a"})
		r.Segment(transcript.Segment{ID: 1, Start: 20 * time.Second, End: 40 * time.Second, Text: "b"}) // past the 25 s window
		return oneSegment(path), nil
	}}
	r, _ := chunkManager(t, Config{MaxActive: 8}, 4, exec)
	ctx := waitCtx(t)
	j, err := r.m.Submit(ctx, Spec{AudioPath: "/long.wav", Model: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "four chunks running", func() bool {
		g, _ := r.m.Get(ctx, j.ID)
		return g.Chunks != nil && g.Chunks.Running == 4
	})
	_, events, stop, err := r.m.Subscribe(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var got []string
	for _, c := range []string{"2", "0", "3", "1"} {
		close(turns[c])
		for n := len(got) + 2; len(got) < n; {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("events closed after %v", got)
				}
				if ev.Type == EventSegment {
					got = append(got, fmt.Sprintf("%d:%s-%s", ev.Segment.ID, ev.Segment.Start, ev.Segment.End))
				}
			case <-ctx.Done():
				t.Fatalf("timed out waiting for chunk %s's segments; got %v", c, got)
			}
		}
	}
	want := "0:51s-52s 1:1m10s-1m15s 2:1s-2s 3:20s-25s 4:1m16s-1m17s 5:1m35s-1m40s 6:26s-27s 7:45s-50s"
	if strings.Join(got, " ") != want {
		t.Errorf("live segments\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if res, err := r.m.Wait(ctx, j.ID); err != nil || res.State != Completed {
		t.Fatalf("job %s: %v", res.State, err)
	}
}
