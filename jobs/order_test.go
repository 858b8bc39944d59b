package jobs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/jobs/transcript"
	"github.com/wsched/wsched/placement"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func q(name string, p placement.Priority, arrivedS, expected float64) namedQ {
	return namedQ{name, Queued{Priority: p, Arrived: t0.Add(seconds(arrivedS)), ExpectedSeconds: expected}}
}

type namedQ struct {
	name string
	q    Queued
}

func sorted(o Order, now time.Time, qs ...namedQ) string {
	slices.SortStableFunc(qs, func(a, b namedQ) int { return o.Compare(a.q, b.q, now) })
	var names []string
	for _, x := range qs {
		names = append(names, x.name)
	}
	return fmt.Sprint(names)
}

// TestOrderRules: priority first; within it shortest expected first,
// unknown durations last; aged jobs first in arrival order; 0 is FIFO.
func TestOrderRules(t *testing.T) {
	o := Order{MaxReorderWait: 2 * time.Minute}
	jobs := []namedQ{
		q("long", placement.Normal, 0, 60), q("unknown", placement.Normal, 1, -1), q("short", placement.Normal, 2, 0.5),
		q("mid", placement.Normal, 3, 5), q("low-short", placement.Low, 4, 0.1), q("high-long", placement.High, 5, 90),
	}
	if got := sorted(o, t0.Add(10*time.Second), slices.Clone(jobs)...); got != "[high-long short mid long unknown low-short]" {
		t.Errorf("at 10 s: %s", got)
	}
	// at 121 s "long" and "unknown" have waited 2 min: they no longer yield.
	if got := sorted(o, t0.Add(121*time.Second), slices.Clone(jobs)...); got != "[high-long long unknown short mid low-short]" {
		t.Errorf("at 121 s: %s", got)
	}
	if got := sorted(Order{}, t0.Add(10*time.Second), slices.Clone(jobs)...); got != "[high-long long unknown short mid low-short]" {
		t.Errorf("FIFO: %s", got)
	}
	if next := o.NextAging([]Queued{jobs[0].q, jobs[2].q}, t0.Add(10*time.Second)); !next.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("next aging %v", next)
	}
}

// TestOrderAgingBoundsWait runs one slot against a stream of short jobs that
// never ends: without aging the long job starves; with it, it starts within
// max_reorder_wait plus one short job.
func TestOrderAgingBoundsWait(t *testing.T) {
	start := func(o Order) time.Duration {
		queue := []Queued{{Arrived: t0, ExpectedSeconds: 600, Seq: 0}}
		now, seq := t0, uint64(1)
		for step := 0; step < 1000; step++ {
			for now.Sub(t0) >= time.Duration(seq-1)*time.Second { // one 3 s clip per second
				queue = append(queue, Queued{Arrived: t0.Add(time.Duration(seq-1) * time.Second), ExpectedSeconds: 2, Seq: seq})
				seq++
			}
			slices.SortStableFunc(queue, func(a, b Queued) int { return o.Compare(a, b, now) })
			next := queue[0]
			queue = queue[1:]
			if next.Seq == 0 {
				return now.Sub(t0)
			}
			now = now.Add(seconds(next.ExpectedSeconds))
		}
		return -1
	}
	if got := start(Order{MaxReorderWait: time.Hour * 24}); got != -1 {
		t.Errorf("without aging the long job started after %v; the clips should pass it forever", got)
	}
	got := start(Order{MaxReorderWait: time.Minute})
	if got < time.Minute || got > time.Minute+2*time.Second {
		t.Errorf("with aging 1m the long job started after %v, want within 1m + one clip", got)
	}
}

func TestRTFLearning(t *testing.T) {
	tab := NewRTFTable()
	k := RTFKey{Model: "base", Backend: "whisper.cpp", GPUModel: "NVIDIA H100 80GB HBM3"}
	if got := tab.RTF(k); got != DefaultRTF("base", true) {
		t.Errorf("default %v", got)
	}
	if tab.RTF(RTFKey{Model: "large-v3"}) <= tab.RTF(RTFKey{Model: "tiny"}) {
		t.Error("the CPU default of large is not above tiny's")
	}
	tab.Observe(k, 100, 5)
	if got := tab.RTF(k); got != 0.05 {
		t.Errorf("after one job %v, want 0.05", got)
	}
	tab.Observe(k, 100, 15)
	if got := tab.RTF(k); math.Abs(got-(0.3*0.15+0.7*0.05)) > 1e-12 {
		t.Errorf("after two jobs %v", got)
	}
	tab.Observe(k, math.NaN(), 1)
	tab.Observe(k, 10, math.Inf(1))
	tab.Observe(k, 0, 1)
	if got := tab.ModelRTF("base", true); math.Abs(got-(0.3*0.15+0.7*0.05)) > 1e-12 {
		t.Errorf("model RTF %v (bad observations must be ignored)", got)
	}
	if tab.Expected(k, 0) >= 0 || tab.Expected(k, math.Inf(1)) >= 0 || tab.Expected(k, 10) <= 0 {
		t.Error("Expected: unknown durations must be negative, known positive")
	}
}

// wav builds a PCM WAV header (and data) for secs seconds at byteRate, with
// an extra chunk before the data.
func wav(secs float64, byteRate uint32, dataSize uint32, withData bool) []byte {
	var b bytes.Buffer
	n := uint32(secs * float64(byteRate))
	if dataSize == 0 {
		dataSize = n
	}
	b.WriteString("RIFF")
	_ = binary.Write(&b, binary.LittleEndian, uint32(36+12+n))
	b.WriteString("WAVEfmt ")
	_ = binary.Write(&b, binary.LittleEndian, []uint32{16})
	_ = binary.Write(&b, binary.LittleEndian, []uint16{1, 1})
	_ = binary.Write(&b, binary.LittleEndian, []uint32{byteRate, byteRate})
	_ = binary.Write(&b, binary.LittleEndian, []uint16{1, 8})
	b.WriteString("LIST")
	_ = binary.Write(&b, binary.LittleEndian, uint32(3))
	b.Write([]byte{1, 2, 3, 0}) // odd size, padded
	b.WriteString("data")
	_ = binary.Write(&b, binary.LittleEndian, dataSize)
	if withData {
		b.Write(make([]byte, n))
	}
	return b.Bytes()
}

func TestWAVDuration(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want float64
	}{
		{"plain", wav(3, 100, 0, true), 3},
		{"streamed size", wav(4, 100, math.MaxUint32, true), 4},
		{"size past the end", wav(2, 100, 100000, true), 2},
	} {
		got, err := WAVDuration(bytes.NewReader(tc.data), int64(len(tc.data)))
		if err != nil || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range [][]byte{nil, []byte("RIFF\x00\x00\x00\x00WAVX"), wav(1, 0, 0, true), []byte("ID3\x04 not a wav file at all")} {
		if _, err := WAVDuration(bytes.NewReader(bad), int64(len(bad))); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	p := filepath.Join(t.TempDir(), "a.wav")
	if err := os.WriteFile(p, wav(7.5, 32000, 0, true), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ProbeAudio(context.Background(), p); err != nil || got != 7.5 {
		t.Errorf("a.wav: %v, %v; want 7.5 s", got, err)
	}
	if _, err := ProbeAudio(context.Background(), filepath.Join(t.TempDir(), "missing.wav")); !errors.Is(err, ErrUnknownDuration) {
		t.Errorf("missing file: %v", err)
	}
}

// TestProbeAudioFFprobe: a format other than WAV is measured by ffprobe.
func TestProbeAudioFFprobe(t *testing.T) {
	ffmpeg, err := exec.LookPath("ffmpeg")
	if _, perr := exec.LookPath("ffprobe"); err != nil || perr != nil {
		t.Skip("no ffmpeg and ffprobe on PATH")
	}
	p := filepath.Join(t.TempDir(), "a.flac")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, ffmpeg, "-v", "error", "-f", "lavfi", "-i", "anullsrc=r=16000:cl=mono", "-t", "4", "-c:a", "flac", p).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v\n%s", err, out)
	}
	got, err := ProbeAudio(ctx, p)
	if err != nil || math.Abs(got-4) > 0.1 {
		t.Errorf("a.flac: %v, %v; want 4 s", got, err)
	}
}

func FuzzWAVDuration(f *testing.F) {
	f.Add(wav(3, 100, 0, true))
	f.Add(wav(1, 8000, math.MaxUint32, false))
	f.Add([]byte("RIFF\x24\x00\x00\x00WAVEdata\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := WAVDuration(bytes.NewReader(b), int64(len(b)))
		if err == nil && (d < 0 || math.IsNaN(d) || math.IsInf(d, 0) || d > float64(len(b))) {
			t.Fatalf("duration %v from %d bytes", d, len(b))
		}
	})
}

// TestManagerShortestFirst: with one job running, a long and then a short
// job queue; the short one starts first, /v1/jobs shows audio_seconds,
// expected_seconds and expected_start; with max_reorder_wait 1ns (every job
// aged at once) arrival order holds.
func TestManagerShortestFirst(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, secs float64) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, wav(secs, 100, 0, true), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	long, short := write("long.wav", 600), write("short.wav", 3)
	for _, tc := range []struct {
		wait time.Duration
		want string
	}{{time.Hour, "[first short long]"}, {time.Nanosecond, "[first long short]"}} {
		r := startManager(t, Config{MaxActive: 1, MaxReorderWait: tc.wait}, &fakeExec{}, nil)
		ctx := context.Background()
		release := make(chan struct{})
		r.exec.on("first", block(release))
		first, _ := r.m.Submit(ctx, Spec{AudioPath: short, Model: "first"})
		waitState(t, r.m, first.ID, Loading)
		l, err := r.m.Submit(ctx, Spec{AudioPath: long, Model: "long"})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := r.m.Submit(ctx, Spec{AudioPath: short, Model: "short"})
		if l.AudioSeconds != 600 || s.AudioSeconds != 3 || !(l.ExpectedSeconds > s.ExpectedSeconds) || s.ExpectedSeconds <= 0 {
			t.Errorf("admitted: long %v s (expected %v), short %v s (expected %v)", l.AudioSeconds, l.ExpectedSeconds, s.AudioSeconds, s.ExpectedSeconds)
		}
		list, _ := r.m.List(ctx)
		starts := map[string]time.Time{}
		for _, j := range list {
			starts[j.Spec.Model] = j.ExpectedStart
		}
		if starts["long"].IsZero() || starts["short"].IsZero() || !starts["first"].IsZero() {
			t.Errorf("expected starts %v", starts)
		} else if (tc.wait == time.Hour) != starts["short"].Before(starts["long"]) {
			t.Errorf("wait %v: expected starts %v", tc.wait, starts)
		}
		close(release)
		for _, id := range []string{first.ID, l.ID, s.ID} {
			if _, err := r.m.Wait(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		r.stop()
		r.exec.mu.Lock()
		if got := fmt.Sprint(r.exec.started); got != tc.want {
			t.Errorf("max_reorder_wait %v: start order %s, want %s", tc.wait, got, tc.want)
		}
		r.exec.mu.Unlock()
	}
}

// TestManagerLearnsRTF: a completed job's processing time over its audio
// becomes the model's real-time factor, which the next job's expected time
// uses.
func TestManagerLearnsRTF(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.wav")
	if err := os.WriteFile(p, wav(100, 100, 0, true), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startManager(t, Config{}, &fakeExec{}, nil)
	defer r.stop()
	ctx := context.Background()
	r.exec.on("m", func(ctx context.Context, j Job, rep Reporter) (transcript.Transcript, error) {
		rep.Placed(Placement{GPUUUID: "GPU-1"})
		rep.Processing()
		time.Sleep(20 * time.Millisecond)
		return transcript.Transcript{Text: "x"}, nil
	})
	j, _ := r.m.Submit(ctx, Spec{AudioPath: p, Model: "m"})
	if _, err := r.m.Wait(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	j2, _ := r.m.Submit(ctx, Spec{AudioPath: p, Model: "m"})
	if j2.ExpectedSeconds < 0.02 || j2.ExpectedSeconds == j.ExpectedSeconds {
		t.Errorf("expected %v s after a job that took ≥ 20 ms (first guess %v s)", j2.ExpectedSeconds, j.ExpectedSeconds)
	}
	if _, err := r.m.Wait(ctx, j2.ID); err != nil {
		t.Fatal(err)
	}
}

// TestLimitedProbe: a broken WAV header is not handed to ffprobe; while
// every ffprobe slot is taken a probe does without (a WAV is still read,
// other formats are unknown at once).
func TestLimitedProbe(t *testing.T) {
	dir := t.TempDir()
	broken, good, other := filepath.Join(dir, "b.wav"), filepath.Join(dir, "g.wav"), filepath.Join(dir, "o.mp3")
	_ = os.WriteFile(broken, []byte("RIFF\x10\x00\x00\x00WAVEjunk"), 0o600)
	_ = os.WriteFile(good, wav(2, 100, 0, true), 0o600)
	_ = os.WriteFile(other, []byte("ID3 not really audio"), 0o600)
	if _, err := ProbeAudio(context.Background(), broken); !errors.Is(err, ErrUnknownDuration) || !errors.Is(err, errBrokenWAV) {
		t.Errorf("broken WAV: %v", err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	probe := limited(1, func(ctx context.Context, path string, ffprobe bool) (float64, error) {
		if path == "hold" {
			close(entered)
			<-release
			return 0, ErrUnknownDuration
		}
		return probeAudio(ctx, path, ffprobe)
	})
	done := make(chan struct{})
	go func() { defer close(done); _, _ = probe(context.Background(), "hold") }()
	<-entered
	if _, err := probe(context.Background(), other); err == nil || !strings.Contains(err.Error(), "ffprobe busy") {
		t.Errorf("non-WAV while the slot is taken: %v", err)
	}
	if d, err := probe(context.Background(), good); err != nil || d != 2 {
		t.Errorf("WAV while the slot is taken: %v, %v", d, err)
	}
	close(release)
	<-done
	if _, err := probe(context.Background(), other); err != nil && strings.Contains(err.Error(), "ffprobe busy") {
		t.Errorf("the slot was not given back: %v", err)
	}
}

// TestExpectedStartsWithChunksRunning: a running chunk of a chunked job and
// a running whole job each hold a slot until their expected end; a pending
// job starts on the slot that frees first, whichever order the table is
// walked in (a map: run with -count).
func TestExpectedStartsWithChunksRunning(t *testing.T) {
	m := New(Config{MaxActive: 2}, nil, &memJobs{jobs: map[string]Job{}}, nil)
	now := time.Unix(1_000_000, 0)
	m.now = func() time.Time { return now }
	s := m.st
	running := func(id string, audio float64) *entry {
		return &entry{running: true, job: Job{ID: id, Spec: Spec{Model: "tiny"}, State: Processing, AudioSeconds: audio,
			Timings: map[State]Timing{Processing: {Entered: now}}}}
	}
	chunk := running("split-0", 10)
	whole := running("whole", 100)
	parent := &entry{running: true, job: Job{ID: "split", Spec: Spec{Model: "tiny"}, State: Processing, AudioSeconds: 30},
		split: &split{units: []*entry{chunk}, running: 1}}
	waiting := &entry{job: Job{ID: "waiting", Spec: Spec{Model: "tiny"}, State: Pending, AudioSeconds: 1}}
	s.jobs = map[string]*entry{"whole": whole, "split": parent, "waiting": waiting}
	s.pending, s.active = []*entry{waiting}, 2
	got := s.expectedStarts()["waiting"]
	if want := now.Add(seconds(s.expectedOf(chunk))); !got.Equal(want) {
		t.Fatalf("expected start %s after now; want %s (when the chunk ends, before the whole job's %s)",
			got.Sub(now), want.Sub(now), seconds(s.expectedOf(whole)))
	}
}
