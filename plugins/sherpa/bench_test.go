package sherpa

import (
	"testing"
	"time"

	"github.com/wsched/wsched/estimator/onnx/onnxtest"
	"github.com/wsched/wsched/plugins"
)

// BenchmarkJFK times the generated SenseVoice-shaped model on jfk.wav in
// process, side by side: cold (load the recognizer, decode, unload) and
// warm (decode with the recognizer loaded). It reports the audio's
// real-time factor of each and the cold/warm ratio:
//
//	go test -run '^$' -bench JFK -benchtime 20x ./plugins/sherpa/
//
// The end-to-end figures through the daemon (backend start included) are
// TestSmoke's log in cmd/wsched-backend-sherpa.
func BenchmarkJFK(b *testing.B) {
	audio := jfk(b)
	for _, vocab := range []int{64, 20000} {
		dir := senseVoiceDir(b, onnxtest.SenseVoiceOptions{Vocab: vocab})
		req := plugins.LoadRequest{ModelPath: dir, Device: "cpu", Threads: 2}
		be, _ := newBackend(b)
		var cold, warm time.Duration
		b.Run(benchName("cold", vocab), func(b *testing.B) {
			for b.Loop() {
				if _, err := be.Load(b.Context(), req); err != nil {
					b.Fatal(err)
				}
				transcribe(b, be, audio)
				if err := be.Unload(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			cold = perOp(b)
			b.ReportMetric(11/cold.Seconds(), "x_realtime")
		})
		if _, err := be.Load(b.Context(), req); err != nil {
			b.Fatal(err)
		}
		b.Run(benchName("warm", vocab), func(b *testing.B) {
			for b.Loop() {
				transcribe(b, be, audio)
			}
			warm = perOp(b)
			b.ReportMetric(11/warm.Seconds(), "x_realtime")
			if cold > 0 {
				b.ReportMetric(float64(cold)/float64(warm), "cold/warm")
			}
		})
		_ = be.Unload(b.Context())
	}
}

func benchName(kind string, vocab int) string {
	if vocab < 1000 {
		return kind + "/vocab64"
	}
	return kind + "/vocab20000"
}

func transcribe(b *testing.B, be *Backend, audio string) {
	if _, err := be.Transcribe(b.Context(), plugins.TranscribeRequest{AudioPath: audio}, nil); err != nil {
		b.Fatal(err)
	}
}

func perOp(b *testing.B) time.Duration { return b.Elapsed() / time.Duration(max(b.N, 1)) }
