package sherpa

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/estimator/onnx/onnxtest"
	"github.com/wsched/wsched/plugins"
)

// loadStreams returns a Backend with a generated SenseVoice model loaded
// serving n streams, whose batches wait up to window for the calls in
// flight.
func loadStreams(t *testing.T, n int, window time.Duration) *Backend {
	t.Helper()
	b := New(Options{FFmpeg: FFmpegNone, BatchWindow: window})
	req := plugins.LoadRequest{ModelPath: senseVoiceDir(t, onnxtest.SenseVoiceOptions{}), Device: "cpu", Threads: 1,
		Extra: map[string]string{ExtraMaxStreams: fmt.Sprint(n)}}
	if _, err := b.Load(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Unload(t.Context()) })
	return b
}

// TestStreamsBatched: concurrent calls on one recognizer are decoded in
// one DecodeStreams run, and each gets the text it gets alone. The test
// holds three more calls in flight, so the batcher waits for a full batch
// (max_streams pieces) whichever call submits first; the window is long:
// the batch fires because the three pieces are in, not because time passed
// (a piece decoded alone would wait it out: the test's bound).
func TestStreamsBatched(t *testing.T) {
	const n = 3
	b := loadStreams(t, n, 10*time.Minute)
	wavs := []string{jfk(t), repeatWAV(t, jfk(t), 2), jfk(t)} // 11 s, 22 s, 11 s: one piece each
	alone := make([]string, n)
	for i, wav := range wavs {
		res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: wav}, nil)
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = res.Text
	}
	before := b.loaded().batch.statsNow()
	if before.Largest != 1 || before.Runs != n {
		t.Fatalf("alone: %+v; want %d runs of one", before, n)
	}
	for range n {
		b.loaded().batch.join()
		defer b.loaded().batch.leave()
	}
	texts, errs := make([]string, n), make([]error, n)
	var wg sync.WaitGroup
	for i, wav := range wavs {
		wg.Go(func() {
			res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: wav}, nil)
			texts[i], errs[i] = res.Text, err
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the concurrent calls did not end: their pieces were not batched")
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if texts[i] != alone[i] {
			t.Errorf("call %d: batched text %.60q…, alone %.60q…", i, texts[i], alone[i])
		}
	}
	st := b.loaded().batch.statsNow()
	if runs, pieces := st.Runs-before.Runs, st.Pieces-before.Pieces; runs != 1 || pieces != n || st.Largest != n {
		t.Errorf("batched: %d runs for %d pieces, largest %d; want one run of %d", runs, pieces, st.Largest, n)
	}
	info, err := b.Info(t.Context())
	if err != nil || info.Metadata["max_streams"] != "3" {
		t.Errorf("Info metadata %v, %v: want max_streams 3", info.Metadata, err)
	}
}

// TestStreamsBatchBound: a batch holds at most max_streams pieces, and a
// call whose piece waits for others that never come is decoded when the
// window ends.
func TestStreamsBatchBound(t *testing.T) {
	b := loadStreams(t, 2, 50*time.Millisecond)
	m := b.loaded()
	m.batch.join() // a call in flight that submits nothing: the window decides
	defer m.batch.leave()
	if _, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, nil); err != nil {
		t.Fatal(err)
	}
	long := repeatWAV(t, jfk(t), 6) // 66 s: three pieces in one call, one at a time
	if _, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: long}, nil); err != nil {
		t.Fatal(err)
	}
	if st := m.batch.statsNow(); st.Largest != 1 || st.Pieces != 4 {
		t.Errorf("stats %+v; want 4 pieces, each decoded alone", st)
	}
}
