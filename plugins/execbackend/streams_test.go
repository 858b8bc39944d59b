package execbackend

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
)

// streamsLoad loads the test app declaring maxStreams, its transcriptions
// waiting until barrier of them are in flight at once (at most timeout
// seconds); the backend is reached through the real gRPC shims.
func streamsLoad(t *testing.T, maxStreams, barrier int, timeout string) plugins.Backend {
	t.Helper()
	b := newBackend(t)
	req, _ := appLoad(t, ProtocolOpenAI, map[string]string{"APP_BARRIER": fmt.Sprint(barrier), "APP_BARRIER_TIMEOUT": timeout})
	req.Extra[ExtraMaxStreams] = fmt.Sprint(maxStreams)
	if _, err := b.Load(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	return plugintest.Connect(t, b)
}

// transcribeAll runs n Transcribe calls at once and returns their texts.
func transcribeAll(t *testing.T, be plugins.Backend, n int) []string {
	t.Helper()
	texts, errs := make([]string, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := be.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t)}, noEvents)
			texts[i], errs[i] = res.Text, err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	return texts
}

// TestStreamsForwardedInParallel: an app declaring max_streams 3 gets three
// concurrent calls at once (each of its transcriptions waits until three
// are in flight and says how many it saw), and the app is told the
// concurrency it declared. Serialized calls would each wait out the app's
// 60 s barrier alone and see one.
func TestStreamsForwardedInParallel(t *testing.T) {
	be := streamsLoad(t, 3, 3, "60")
	for i, text := range transcribeAll(t, be, 3) {
		if !strings.HasSuffix(text, " inflight=3") {
			t.Errorf("call %d: %q; want the app to have seen 3 in flight", i, text)
		}
	}
	info, err := be.Info(t.Context())
	if err != nil || info.Metadata["max_streams"] != "3" {
		t.Errorf("Info metadata %v, %v: want max_streams 3", info.Metadata, err)
	}
}

// TestStreamsDefaultOne: an app that declares nothing takes one call at a
// time: three concurrent calls reach it one by one (its barrier of two,
// 0.3 s, is never met).
func TestStreamsDefaultOne(t *testing.T) {
	b := newBackend(t)
	req, _ := appLoad(t, ProtocolOpenAI, map[string]string{"APP_BARRIER": "2", "APP_BARRIER_TIMEOUT": "0.3"})
	if _, err := b.Load(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	for i, text := range transcribeAll(t, plugintest.Connect(t, b), 3) {
		if !strings.HasSuffix(text, " inflight=1") {
			t.Errorf("call %d: %q; want the app to have seen 1 in flight", i, text)
		}
	}
	if d := Descriptor(); d.Streams() != 1 {
		t.Errorf("descriptor streams %d, want 1", d.Streams())
	}
}
