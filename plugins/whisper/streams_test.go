//go:build whisper

package whisper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
)

// streamsTimeout bounds every wait in these tests.
const streamsTimeout = 2 * time.Minute

// loadStreams returns a Backend with tiny.en loaded on the CPU (flash
// attention off, one thread per stream) serving n streams.
func loadStreams(t *testing.T, n int) *Backend {
	t.Helper()
	b := newBackend(t, Options{FFmpeg: FFmpegNone})
	req := plugins.LoadRequest{ModelPath: tinyEN(t), Device: "cpu", Threads: 1, Extra: map[string]string{ExtraMaxStreams: fmt.Sprint(n)}}
	if _, err := b.Load(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Unload(context.Background()) })
	return b
}

// wantStream is one state's buffers for tiny.en on the CPU without flash
// attention: what whisper_init_state logs (kv self/cross/pad, compute).
func wantStream() plugins.MemoryReport {
	r := logged(false)
	r.TotalBytes -= r.ModelBytes
	r.ModelBytes = 0
	return r
}

func sameReport(a, b plugins.MemoryReport) bool {
	return a.ModelBytes == b.ModelBytes && a.KVSelfBytes == b.KVSelfBytes && a.KVCrossBytes == b.KVCrossBytes &&
		a.KVPadBytes == b.KVPadBytes && a.TotalBytes == b.TotalBytes && maps.Equal(a.ComputeBytes, b.ComputeBytes)
}

// TestStreamsRunInParallel: n calls on one loaded model are inside
// whisper_full at the same time, each on a state of its own (n states
// allocated at once); each returns its state's buffers as StreamMemory,
// and every state is freed once the calls end. Each call's progress
// callback (run by whisper.cpp from inside whisper_full) waits until all n
// calls have reached theirs: were the calls serialized, the first would
// wait forever and fail at the bound. The calls go through the real gRPC
// shims, and StreamMemory with them.
func TestStreamsRunInParallel(t *testing.T) {
	const n = 3
	b := loadStreams(t, n)
	be := plugintest.Connect(t, b)
	var (
		arrived sync.WaitGroup
		all     = make(chan struct{})
		inState = make(chan int64, n)
	)
	arrived.Add(n)
	go func() { arrived.Wait(); close(all) }()
	results := make([]plugins.Result, n)
	errs := make([]error, n)
	var calls sync.WaitGroup
	for i := range n {
		calls.Go(func() {
			first := true
			emit := func(plugins.Event) error {
				if !first {
					return nil
				}
				first = false
				arrived.Done()
				select {
				case <-all:
					inState <- b.states.Load()
					return nil
				case <-time.After(streamsTimeout):
					return errors.New("the other calls never reached whisper_full: calls are serialized")
				}
			}
			results[i], errs[i] = be.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, emit)
		})
	}
	calls.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if got := results[i].StreamMemory; !sameReport(got, wantStream()) {
			t.Errorf("call %d: StreamMemory %+v, want the state's buffers %+v", i, got, wantStream())
		}
	}
	close(inState)
	for live := range inState {
		if live != n {
			t.Errorf("%d states allocated while %d calls were in whisper_full; want %d", live, n, n)
		}
	}
	if live := b.states.Load(); live != 0 {
		t.Errorf("%d states still allocated after the calls", live)
	}
	info, err := b.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Metadata["states_allocated"] != "0" || info.Metadata["streams_in_flight"] != "0" || info.Metadata["max_streams"] != "3" {
		t.Errorf("metadata %v: want no state, no stream in flight, max_streams 3", info.Metadata)
	}
}

// TestStreamsLimit: with max_streams 1 a second call waits while the first
// is inside whisper_full: it allocates no state and emits nothing until its
// context ends it.
func TestStreamsLimit(t *testing.T) {
	b := loadStreams(t, 1)
	inside, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		once := sync.Once{}
		_, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, func(plugins.Event) error {
			once.Do(func() { close(inside); <-release })
			return nil
		})
		first <- err
	}()
	select {
	case <-inside:
	case <-time.After(streamsTimeout):
		t.Fatal("the first call never reached whisper_full")
	}
	ctx, cancel := context.WithCancel(t.Context())
	second := make(chan error, 1)
	emitted := make(chan struct{}, 1)
	go func() {
		_, err := b.Transcribe(ctx, plugins.TranscribeRequest{AudioPath: jfk(t)}, func(plugins.Event) error {
			select {
			case emitted <- struct{}{}:
			default:
			}
			return nil
		})
		second <- err
	}()
	if live := b.states.Load(); live != 1 {
		t.Errorf("%d states with one call in flight; want 1", live)
	}
	cancel()
	select {
	case err := <-second:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("second call: %v; want it cancelled while waiting", err)
		}
	case <-time.After(streamsTimeout):
		t.Fatal("the cancelled second call did not return")
	}
	select {
	case <-emitted:
		t.Error("the second call ran while the only stream was taken")
	default:
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// TestStreamsUnloadWaits: Unload waits for the calls in flight (their
// states are freed first), and calls after it find no model.
func TestStreamsUnloadWaits(t *testing.T) {
	b := loadStreams(t, 2)
	inside, release := make(chan struct{}), make(chan struct{})
	call := make(chan error, 1)
	go func() {
		once := sync.Once{}
		_, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, func(plugins.Event) error {
			once.Do(func() { close(inside); <-release })
			return nil
		})
		call <- err
	}()
	<-inside
	unloaded := make(chan error, 1)
	go func() { unloaded <- b.Unload(t.Context()) }()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := b.Unload(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Unload with a call in flight: %v; want it to wait (deadline exceeded)", err)
	}
	close(release)
	if err := <-call; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-unloaded:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(streamsTimeout):
		t.Fatal("Unload did not return after the call ended")
	}
	if live := b.states.Load(); live != 0 {
		t.Errorf("%d states after unload", live)
	}
	if _, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, nil); !errors.Is(err, plugins.ErrNotLoaded) {
		t.Errorf("Transcribe after Unload: %v; want ErrNotLoaded", err)
	}
}

// TestStreamsLoadReport: Load reports the weights plus one stream (what
// one job takes, as before streams), and a bad max_streams is refused.
func TestStreamsLoadReport(t *testing.T) {
	b := newBackend(t, Options{FFmpeg: FFmpegNone})
	rep, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: tinyEN(t), Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Unload(context.Background()) })
	if !sameReport(rep, logged(false)) {
		t.Errorf("Load report %+v, want %+v", rep, logged(false))
	}
	if b.model.maxStreams != 4 || b.states.Load() != 0 {
		t.Errorf("max_streams %d (want the default 4), %d states after load (want 0)", b.model.maxStreams, b.states.Load())
	}
	for _, v := range []string{"0", "-1", "many"} {
		_, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: tinyEN(t), Device: "cpu", Extra: map[string]string{ExtraMaxStreams: v}})
		if !errors.Is(err, plugins.ErrBadRequest) || !strings.Contains(err.Error(), "max_streams") {
			t.Errorf("max_streams %q: %v; want ErrBadRequest naming max_streams", v, err)
		}
	}
}

// TestLogSinkTags: lines logged by concurrent calls, in pieces and
// interleaved, reach the call whose tag they carry; an allocation failure
// springs the trap of its call only, and an untagged one every call's.
func TestLogSinkTags(t *testing.T) {
	s := newLogSink(slog.New(slog.DiscardHandler))
	a, c := s.arm(1), s.arm(2)
	s.write(1, levelInfo, "whisper_init_state: kv self size  = ")
	s.write(2, levelInfo, "whisper_init_state: kv self size  =    6.29 MB\n")
	s.write(1, levelCont, "   3.15 MB\nwhisper_init_state: ")
	s.write(0, levelInfo, "ggml: worker says hello\n")
	s.write(1, levelCont, "kv cross size =    9.44 MB\n")
	if r := memoryReport(s.disarm(1)); r.KVSelfBytes != 3_150_000 || r.KVCrossBytes != 9_440_000 {
		t.Errorf("call 1: %+v; want kv self 3.15 MB, kv cross 9.44 MB", r)
	}
	if r := memoryReport(c.lines); r.KVSelfBytes != 6_290_000 || r.KVCrossBytes != 0 {
		t.Errorf("call 2: %+v; want kv self 6.29 MB only", r)
	}
	if len(a.trap) != 0 || len(c.trap) != 0 {
		t.Fatal("a trap sprang without an allocation failure")
	}
	if trapped := s.record(2, []logLine{{levelError, "failed to allocate buffer"}}); !trapped || len(c.trap) != 1 {
		t.Errorf("tagged failure: trapped %v, trap holds %d", trapped, len(c.trap))
	}
	d := s.arm(3)
	if trapped := s.record(0, []logLine{{levelError, "ggml_aligned_malloc: insufficient memory"}}); !trapped || len(d.trap) != 1 {
		t.Errorf("untagged failure: trapped %v, call 3's trap holds %d", trapped, len(d.trap))
	}
}

// TestStreamsVADOnDefaultState: a model loaded with a VAD model keeps its
// default state, and a call asking for VAD runs whisper_full on it (VAD
// lives only there in whisper.cpp 1.9: tiny.en standing in for the VAD
// model fails exactly there), while a call without VAD still gets a state
// of its own.
func TestStreamsVADOnDefaultState(t *testing.T) {
	b := newBackend(t, Options{FFmpeg: FFmpegNone})
	if _, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: tinyEN(t), Device: "cpu", Threads: 1, VADModelPath: tinyEN(t)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Unload(context.Background()) })
	if !b.model.withState || !sameReport(b.model.stream, wantStream()) {
		t.Fatalf("withState %v, stream %+v: want the default state, measured", b.model.withState, b.model.stream)
	}
	_, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t), VAD: true}, nil)
	if err == nil || !strings.Contains(err.Error(), "voice activity detection failed") {
		t.Errorf("VAD call: %v; want whisper_full's VAD failure", err)
	}
	var live int64
	res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, func(plugins.Event) error {
		live = max(live, b.states.Load())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if live != 1 || b.states.Load() != 0 || !sameReport(res.StreamMemory, wantStream()) {
		t.Errorf("call without VAD: %d states during, %d after, StreamMemory %+v; want its own state", live, b.states.Load(), res.StreamMemory)
	}
}
