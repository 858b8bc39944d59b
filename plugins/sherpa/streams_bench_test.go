package sherpa

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/wsched/wsched/estimator/onnx/onnxtest"
	"github.com/wsched/wsched/plugins"
)

// BenchmarkStreams: N concurrent Transcribe calls of jfk.wav (11 s) on one
// loaded generated SenseVoice model (vocabulary 20 000, random weights),
// in audio seconds per wall second, serialized (max_streams 1: one decode
// at a time) against batched (max_streams 8: the calls' pieces decoded in
// one DecodeStreams run), 2 threads for the recognizer either way; medians
// side by side with their ratio:
//
//	go test -run '^$' -bench BenchmarkStreams -benchtime 5x ./plugins/sherpa/
func BenchmarkStreams(b *testing.B) {
	counts := []int{1, 2, 4, 8}
	dir := senseVoiceDir(b, onnxtest.SenseVoiceOptions{Vocab: 20000})
	wav := jfk(b)
	modes := []struct {
		name    string
		streams int
	}{{"serialized", 1}, {"batched", 8}}
	rates := map[string]map[int][]float64{"serialized": {}, "batched": {}}
	be, _ := newBackend(b)
	load := func(streams int) {
		req := plugins.LoadRequest{ModelPath: dir, Device: "cpu", Threads: 2, Extra: map[string]string{ExtraMaxStreams: fmt.Sprint(streams)}}
		if _, err := be.Load(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { _ = be.Unload(b.Context()) })
	round := 0
	for b.Loop() {
		for k := range modes {
			m := modes[(round+k)%len(modes)]
			load(m.streams)
			transcribe(b, be, wav) // warm
			for _, n := range counts {
				start := time.Now()
				var wg sync.WaitGroup
				for range n {
					wg.Go(func() { transcribe(b, be, wav) })
				}
				wg.Wait()
				rates[m.name][n] = append(rates[m.name][n], float64(n)*11/time.Since(start).Seconds())
			}
		}
		round++
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\nsherpa streams: generated SenseVoice (vocabulary 20000), jfk.wav, CPU (%d cores), 2 threads; median of %d rounds:\n", runtime.NumCPU(), round)
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "concurrent\tserialized audio-s/s\tbatched audio-s/s\tratio\t")
	for _, n := range counts {
		s, p := medianOf(rates["serialized"][n]), medianOf(rates["batched"][n])
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.2f×\t\n", n, s, p, p/s)
	}
	_ = tw.Flush()
	fmt.Print(out.String())
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
