package sherpa

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/wsched/wsched/estimator/onnx/onnxtest"
	"github.com/wsched/wsched/plugins"
)

// TestVAD cuts jfk.wav with a generated silero-VAD-shaped model (an energy
// detector with silero v5's interface, run by sherpa-onnx's real VAD): the
// speech comes back as several segments, in order, inside the audio, and
// without the leading silence.
func TestVAD(t *testing.T) {
	vad := filepath.Join(t.TempDir(), "silero_vad.onnx")
	if err := onnxtest.WriteSileroVAD(vad); err != nil {
		t.Fatal(err)
	}
	b := loaded(t, plugins.LoadRequest{Device: "cpu", Threads: 1, VADModelPath: vad})
	if info, _ := b.Info(t.Context()); info.Metadata["vad"] != "true" {
		t.Errorf("info: vad %q", info.Metadata["vad"])
	}
	var segments int
	res, err := b.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: jfk(t), VAD: true}, func(ev plugins.Event) error {
		if ev.Kind == plugins.EventSegment {
			segments++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Segments) < 2 || segments != len(res.Segments) {
		t.Fatalf("%d segments (%d emitted), want the pauses to cut the speech", len(res.Segments), segments)
	}
	var end time.Duration
	for i, s := range res.Segments {
		t.Logf("segment %d: %v–%v", i, s.Start, s.End)
		if s.Start < end || s.End <= s.Start || s.End > res.Duration {
			t.Errorf("segment %d %v–%v after %v (audio %v)", i, s.Start, s.End, end, res.Duration)
		}
		end = s.End
	}
	if res.Segments[0].Start == 0 {
		t.Error("the first segment starts at 0: the leading silence was not cut")
	}
}
