package plugins_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
)

func TestInfo(t *testing.T) {
	b := plugintest.Connect(t, fake(map[string]string{
		"CUDA_VISIBLE_DEVICES": "GPU-0f6e-test",
		"CUDA_DEVICE_ORDER":    "PCI_BUS_ID",
	}))
	info, err := b.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "fake" || info.Version != "0.0.0-test" {
		t.Errorf("name, version = %q, %q; want fake, 0.0.0-test", info.Name, info.Version)
	}
	if !slices.Equal(info.ModelFormats, []string{"fake"}) || !slices.Equal(info.Devices, []string{"cpu", "cuda"}) {
		t.Errorf("formats, devices = %v, %v", info.ModelFormats, info.Devices)
	}
	for k, want := range map[string]string{
		"env.CUDA_VISIBLE_DEVICES": "GPU-0f6e-test",
		"env.CUDA_DEVICE_ORDER":    "PCI_BUS_ID",
		"mtls":                     "false",
		"model":                    "",
	} {
		if got, ok := info.Metadata[k]; !ok || got != want {
			t.Errorf("metadata[%q] = %q (present %v), want %q", k, got, ok, want)
		}
	}
	if _, ok := info.Metadata["env.SENSEVOICE_DEVICE"]; ok {
		t.Errorf("metadata echoes an unset variable: %v", info.Metadata)
	}
}

func TestLoad(t *testing.T) {
	model := testshared.Touch(t, "model.bin")
	defaults, err := plugintest.ParseMemory("")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		memory  string
		path    string
		loadErr string
		want    plugins.MemoryReport
		wantErr error
	}{
		{name: "default report, total filled in", path: model, want: withTotal(defaults, defaults.Sum())},
		{
			name: "explicit total kept", path: model, memory: "model=1000,kv_self=20,kv_cross=30,kv_pad=4,compute.encode=500,total=9999",
			want: plugins.MemoryReport{ModelBytes: 1000, KVSelfBytes: 20, KVCrossBytes: 30, KVPadBytes: 4,
				ComputeBytes: map[string]int64{"encode": 500}, TotalBytes: 9999},
		},
		{name: "missing model", path: model + ".missing", wantErr: plugins.ErrModelNotFound},
		{name: "out of memory", path: model, loadErr: "oom", wantErr: plugins.ErrOutOfMemory},
		{name: "bad model", path: model, loadErr: "bad_model", wantErr: plugins.ErrBadModel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := plugintest.Connect(t, fake(map[string]string{plugintest.Env(plugintest.Memory): tt.memory}))
			extra := map[string]string{}
			if tt.loadErr != "" {
				extra[plugintest.LoadError] = tt.loadErr
			}
			got, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: tt.path, Device: "cuda:0", Threads: 4, Extra: extra})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Load error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			if !memoryEqual(got, tt.want) {
				t.Errorf("Load report = %+v, want %+v", got, tt.want)
			}
			info, err := b.Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if info.Metadata["model"] != tt.path || info.Metadata["device"] != "cuda:0" {
				t.Errorf("after Load, backend has model %q on %q", info.Metadata["model"], info.Metadata["device"])
			}
		})
	}
}

func withTotal(r plugins.MemoryReport, total int64) plugins.MemoryReport {
	r.TotalBytes = total
	return r
}

func memoryEqual(a, b plugins.MemoryReport) bool {
	return a.ModelBytes == b.ModelBytes && a.KVSelfBytes == b.KVSelfBytes && a.KVCrossBytes == b.KVCrossBytes &&
		a.KVPadBytes == b.KVPadBytes && a.TotalBytes == b.TotalBytes && maps.Equal(a.ComputeBytes, b.ComputeBytes)
}

// TestTranscribeStreams checks the order of events and the result of a
// streaming transcription through the fake.
func TestTranscribeStreams(t *testing.T) {
	tests := []struct {
		language, wantLanguage string
		segments               int
	}{
		{language: "de", wantLanguage: "de", segments: 4},
		{language: "auto", wantLanguage: "en", segments: 1},
		{language: "", wantLanguage: "en", segments: 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%d", tt.language, tt.segments), func(t *testing.T) {
			b := loaded(t, map[string]string{plugintest.Env(plugintest.Segments): fmt.Sprint(tt.segments)})
			var got []string
			res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: testshared.Touch(t, "a.wav"), Language: tt.language},
				func(ev plugins.Event) error {
					got = append(got, eventString(ev))
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			var want, texts []string
			for i := range tt.segments {
				want = append(want, fmt.Sprintf("progress %.0f", 100*float64(i)/float64(tt.segments)),
					fmt.Sprintf("segment %d [%v-%v] segment %d", i, time.Duration(i)*time.Second, time.Duration(i+1)*time.Second, i))
				texts = append(texts, fmt.Sprintf("segment %d", i))
			}
			want = append(want, "progress 100")
			if !slices.Equal(got, want) {
				t.Errorf("events:\n got %q\nwant %q", got, want)
			}
			var gotSegs []string
			for _, s := range res.Segments {
				gotSegs = append(gotSegs, eventString(plugins.SegmentEvent(s)))
			}
			if !slices.Equal(gotSegs, filterPrefix(want, "segment")) {
				t.Errorf("Result.Segments = %q, want the streamed segments", gotSegs)
			}
			if res.Text != strings.Join(texts, " ") {
				t.Errorf("result text %q, want %q", res.Text, strings.Join(texts, " "))
			}
			if res.Language != tt.wantLanguage || res.Duration != time.Duration(tt.segments)*time.Second {
				t.Errorf("result language %q duration %v; want %q, %v", res.Language, res.Duration, tt.wantLanguage, time.Duration(tt.segments)*time.Second)
			}
		})
	}
}

func eventString(ev plugins.Event) string {
	switch ev.Kind {
	case plugins.EventProgress:
		return fmt.Sprintf("progress %.0f", ev.Percent)
	case plugins.EventSegment:
		s := ev.Segment
		return fmt.Sprintf("segment %d [%v-%v] %s", s.Index, s.Start, s.End, s.Text)
	}
	return fmt.Sprintf("unknown kind %d", ev.Kind)
}

func filterPrefix(ss []string, prefix string) []string {
	var out []string
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// TestReturnedSegments checks that segments a backend returns without
// emitting reach the host exactly once, numbered in order.
func TestReturnedSegments(t *testing.T) {
	for _, tt := range []struct{ total, emitted int }{{3, 0}, {3, 2}, {3, 3}, {0, 0}} {
		t.Run(fmt.Sprintf("%d of %d emitted", tt.emitted, tt.total), func(t *testing.T) {
			b := plugintest.Connect(t, &stub{transcribe: func(ctx context.Context, _ plugins.TranscribeRequest, emit func(plugins.Event) error) (plugins.Result, error) {
				var res plugins.Result
				for i := range tt.total {
					s := plugins.Segment{Index: 42, Text: fmt.Sprint("s", i)} // Index is the SDK's to set
					res.Segments = append(res.Segments, s)
					if i < tt.emitted {
						if err := emit(plugins.SegmentEvent(s)); err != nil {
							return plugins.Result{}, err
						}
					}
				}
				return res, nil
			}})
			var events []string
			res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{}, func(ev plugins.Event) error {
				events = append(events, fmt.Sprint(ev.Segment.Index, ev.Segment.Text))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var want, got []string
			for i := range tt.total {
				want = append(want, fmt.Sprint(i, "s", i))
			}
			for _, s := range res.Segments {
				got = append(got, fmt.Sprint(s.Index, s.Text))
			}
			if !slices.Equal(events, want) || !slices.Equal(got, want) {
				t.Errorf("events %q, result segments %q; want %q for both", events, got, want)
			}
		})
	}
}

// TestCancellation checks that a host that stops a transcription, by
// cancelling or by an error from its callback, stops it in the backend too.
func TestCancellation(t *testing.T) {
	errStop := errors.New("host stops")
	tests := []struct {
		name    string
		onEvent func(cancel context.CancelFunc) error
		wantErr error
	}{
		{"cancel", func(cancel context.CancelFunc) error { cancel(); return nil }, context.Canceled},
		{"callback error", func(context.CancelFunc) error { return errStop }, errStop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := make(chan error, 1)
			b := plugintest.Connect(t, &stub{transcribe: func(ctx context.Context, _ plugins.TranscribeRequest, emit func(plugins.Event) error) (plugins.Result, error) {
				if err := emit(plugins.ProgressEvent(1)); err != nil {
					return plugins.Result{}, err
				}
				<-ctx.Done() // only the host can end this
				seen <- ctx.Err()
				return plugins.Result{}, ctx.Err()
			}})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			_, err := b.Transcribe(ctx, plugins.TranscribeRequest{}, func(plugins.Event) error { return tt.onEvent(cancel) })
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Transcribe error = %v, want %v", err, tt.wantErr)
			}
			if err := <-seen; !errors.Is(err, context.Canceled) {
				t.Errorf("backend's context ended with %v, want context.Canceled", err)
			}
		})
	}
}

// TestDeadline checks that the host's deadline reaches the backend and that
// an expired one comes back as context.DeadlineExceeded.
func TestDeadline(t *testing.T) {
	t.Run("propagated", func(t *testing.T) {
		hostDeadline := time.Now().Add(time.Hour)
		b := plugintest.Connect(t, &stub{load: func(ctx context.Context, _ plugins.LoadRequest) (plugins.MemoryReport, error) {
			// gRPC sends the time left, rounded up to its wire precision
			// (here milliseconds), so allow that much.
			d, ok := ctx.Deadline()
			if diff := d.Sub(hostDeadline).Abs(); !ok || diff > time.Second {
				return plugins.MemoryReport{}, fmt.Errorf("backend deadline %v (set %v), want %v", d, ok, hostDeadline)
			}
			return plugins.MemoryReport{}, nil
		}})
		ctx, cancel := context.WithDeadline(t.Context(), hostDeadline)
		defer cancel()
		if _, err := b.Load(ctx, plugins.LoadRequest{}); err != nil {
			t.Error(err)
		}
	})
	t.Run("expired", func(t *testing.T) {
		b := plugintest.Connect(t, &stub{transcribe: func(ctx context.Context, _ plugins.TranscribeRequest, _ func(plugins.Event) error) (plugins.Result, error) {
			<-ctx.Done()
			return plugins.Result{}, ctx.Err()
		}})
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		if _, err := b.Transcribe(ctx, plugins.TranscribeRequest{}, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Transcribe error = %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestUnloadAndHealth(t *testing.T) {
	b := loaded(t, nil)
	ctx := t.Context()
	audio := testshared.Touch(t, "a.wav")
	if err := b.Health(ctx); err != nil {
		t.Fatalf("Health = %v", err)
	}
	if _, err := b.Transcribe(ctx, plugins.TranscribeRequest{AudioPath: audio}, nil); err != nil {
		t.Fatalf("Transcribe before Unload = %v", err)
	}
	if _, err := b.Transcribe(ctx, plugins.TranscribeRequest{AudioPath: audio + ".missing"}, nil); !errors.Is(err, plugins.ErrBadAudio) {
		t.Errorf("Transcribe of a missing file = %v, want ErrBadAudio", err)
	}
	for range 2 { // unloading twice is not an error
		if err := b.Unload(ctx); err != nil {
			t.Fatalf("Unload = %v", err)
		}
	}
	if _, err := b.Transcribe(ctx, plugins.TranscribeRequest{AudioPath: audio}, nil); !errors.Is(err, plugins.ErrNotLoaded) {
		t.Errorf("Transcribe after Unload = %v, want ErrNotLoaded", err)
	}
	unhealthy := plugintest.Connect(t, fake(map[string]string{plugintest.Env(plugintest.HealthError): "unavailable"}))
	if err := unhealthy.Health(ctx); !errors.Is(err, plugins.ErrUnavailable) {
		t.Errorf("Health of an unhealthy backend = %v, want ErrUnavailable", err)
	}
}

// TestEmitMisuse checks that emit refuses events after Transcribe returned
// and events of no known kind.
func TestEmitMisuse(t *testing.T) {
	var (
		mu    sync.Mutex
		saved func(plugins.Event) error
	)
	b := plugintest.Connect(t, &stub{transcribe: func(_ context.Context, _ plugins.TranscribeRequest, emit func(plugins.Event) error) (plugins.Result, error) {
		mu.Lock()
		saved = emit
		mu.Unlock()
		return plugins.Result{}, emit(plugins.Event{})
	}})
	if _, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{}, nil); err == nil {
		t.Error("an event of kind 0 was accepted")
	}
	mu.Lock()
	defer mu.Unlock()
	if err := saved(plugins.ProgressEvent(5)); err == nil {
		t.Error("emit after Transcribe returned succeeded")
	}
}

// TestConcurrentTranscribe runs transcriptions side by side on one
// connection (meaningful under -race).
func TestConcurrentTranscribe(t *testing.T) {
	const n, segs = 4, 5
	b := loaded(t, map[string]string{plugintest.Env(plugintest.Segments): fmt.Sprint(segs)})
	audio := testshared.Touch(t, "a.wav")
	errs := make(chan error, n)
	for range n {
		go func() {
			res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: audio}, nil)
			if err == nil && len(res.Segments) != segs {
				err = fmt.Errorf("got %d segments, want %d", len(res.Segments), segs)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
