package execbackend

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/wsched/wsched/plugins"
)

// BenchmarkLatency measures the exec backend on jfk.wav against the
// SenseVoice-shaped test app, side by side with its floor:
//
//	direct  a multipart POST straight to the running app (no backend)
//	warm    Transcribe through the backend on the running app
//	cold    Load (start the app, wait for /health) + Transcribe + Unload
//
// and reports warm/direct and cold/warm. The app has no model to load, so
// cold is the backend's own start-up cost plus Python's; a real app adds
// its model load.
//
//	go test -run '^$' -bench Latency -benchtime 20x ./plugins/execbackend/
func BenchmarkLatency(b *testing.B) {
	ctx := context.Background()
	be := New(Options{Log: slog.New(slog.DiscardHandler), StopGrace: 2 * time.Second})
	defer be.Close()
	req, _ := appLoad(b, ProtocolOpenAI, nil)
	audio := jfk(b)
	treq := plugins.TranscribeRequest{AudioPath: audio}
	if _, err := be.Load(ctx, req); err != nil {
		b.Fatal(err)
	}
	a, _ := be.running()
	var direct, warm, cold time.Duration
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			postDirect(b, be.client, a.base+DefaultOpenAIPath, audio)
		}
		direct = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("warm", func(b *testing.B) {
		for b.Loop() {
			if _, err := be.Transcribe(ctx, treq, noEvents); err != nil {
				b.Fatal(err)
			}
		}
		warm = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			if _, err := be.Load(ctx, req); err != nil {
				b.Fatal(err)
			}
			if _, err := be.Transcribe(ctx, treq, noEvents); err != nil {
				b.Fatal(err)
			}
			_ = be.Unload(ctx)
		}
		cold = b.Elapsed() / time.Duration(b.N)
	})
	if direct > 0 && warm > 0 && cold > 0 {
		b.Logf("jfk.wav: direct %s, warm %s (%.2f× direct), cold %s (%.1f× warm)", direct.Round(10*time.Microsecond),
			warm.Round(10*time.Microsecond), float64(warm)/float64(direct), cold.Round(time.Millisecond), float64(cold)/float64(warm))
	}
}

// postDirect sends the file as the backend would, to the app itself.
func postDirect(b *testing.B, c *http.Client, url, audio string) {
	data, err := os.ReadFile(audio)
	if err != nil {
		b.Fatal(err)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("response_format", "verbose_json")
	fw, _ := mw.CreateFormFile("file", "jfk.wav")
	_, _ = fw.Write(data)
	_ = mw.Close()
	resp, err := c.Post(url, mw.FormDataContentType(), &body)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
