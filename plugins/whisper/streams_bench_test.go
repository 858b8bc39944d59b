//go:build whisper

package whisper

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/internal/audio"
)

// streamCounts are the concurrent streams BenchmarkStreams measures.
var streamCounts = []int{1, 2, 4, 8}

// BenchmarkStreams is issue 26's throughput on the CPU: N concurrent
// Transcribe calls of jfk.wav (11 s) on ONE loaded instance of
// for-tests-ggml-tiny.en.bin (weightless: the full encoder and decoder
// graphs run on zeros), in audio seconds per wall second, two ways:
//
//   - serialized: the instance loaded with max_streams 1, the old
//     behaviour (calls queue; one whisper.cpp call at a time);
//   - streams: max_streams 8, each call on its own whisper_state, all in
//     parallel.
//
// Both use the same threads per stream (WSCHED_BENCH_THREADS, default 1:
// on a machine of few cores, more threads per call hide what streams
// add). Each iteration runs every N both ways back to back (a fresh load
// each, alternating which goes first, so drift on a shared machine favours
// neither); the table gives the median throughput of each and the ratio:
//
//	eval "$(make -s whisper-env)" && go test -tags whisper -run '^$' -bench BenchmarkStreams$ -benchtime 3x ./plugins/whisper/
func BenchmarkStreams(b *testing.B) {
	threads := benchThreads(b)
	be := New(Options{FFmpeg: FFmpegNone})
	model, wav := tinyEN(b), jfk(b)
	secs := wavSeconds(b, wav)
	load := func(streams int) {
		req := plugins.LoadRequest{ModelPath: model, Device: "cpu", Threads: threads, FlashAttention: true,
			Extra: map[string]string{ExtraMaxStreams: strconv.Itoa(streams)}}
		if _, err := be.Load(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { _ = be.Unload(context.Background()) })
	modes := []struct {
		name    string
		streams int
	}{{"serialized", 1}, {"streams", slices.Max(streamCounts)}}
	rates := map[string]map[int][]float64{"serialized": {}, "streams": {}}
	for _, m := range modes { // warm-up
		load(m.streams)
		runConcurrent(b, be, wav, 1)
	}
	round := 0
	for b.Loop() {
		for _, n := range streamCounts {
			for k := range modes { // both ways back to back, alternating which goes first
				m := modes[(round+k)%len(modes)]
				load(m.streams)
				wall := runConcurrent(b, be, wav, n)
				rates[m.name][n] = append(rates[m.name][n], float64(n)*secs/wall.Seconds())
			}
		}
		round++
	}
	for _, n := range streamCounts {
		b.ReportMetric(median(rates["streams"][n]), fmt.Sprintf("audio-s/s-%dstreams", n))
	}
	printStreams(rates, threads, round)
}

// runConcurrent transcribes wav n times at once and returns the wall time.
func runConcurrent(b *testing.B, be *Backend, wav string, n int) time.Duration {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	for range n {
		wg.Go(func() {
			if _, err := be.Transcribe(context.Background(), plugins.TranscribeRequest{AudioPath: wav}, nil); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return wall
}

func printStreams(rates map[string]map[int][]float64, threads, rounds int) {
	var out strings.Builder
	fmt.Fprintf(&out, "\nstreams: for-tests-ggml-tiny.en.bin, jfk.wav, CPU (%d cores), %d thread(s) per stream, flash attention on; median of %d rounds:\n",
		runtime.NumCPU(), threads, rounds)
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "concurrent\tserialized audio-s/s\tstreams audio-s/s\tratio\t")
	for _, n := range streamCounts {
		s, p := median(rates["serialized"][n]), median(rates["streams"][n])
		fmt.Fprintf(tw, "%d\t%.2f\t%.2f\t%.2f×\t\n", n, s, p, p/s)
	}
	_ = tw.Flush()
	fmt.Print(out.String())
}

// BenchmarkStreamsDensity is issue 26's density from the buffers this
// backend reports on the CPU: for tiny and large (weightless files: the
// same buffers as the real models, no weights read), one whole instance
// (Load's report: weights plus one stream) against one stream's own state
// (whisper_init_state's buffers, what Result.StreamMemory carries), and
// for N concurrent jobs, N processes against one instance with N streams,
// as bytes and streams per GiB. "best_of 5" adds the KV self regrowth a
// temperature fallback makes (to 7× its logged size, per stream), which
// the estimator reserves. The CPU has no CUDA context (≈ 520 MiB per
// process on a GPU, shared by the streams): on a GPU the ratios grow.
// It also times whisper_init_state + whisper_free_state, the per-call cost
// of a state of its own.
//
//	eval "$(make -s whisper-env)" && go test -tags whisper -run '^$' -bench BenchmarkStreamsDensity -benchtime 1x ./plugins/whisper/
func BenchmarkStreamsDensity(b *testing.B) {
	be := New(Options{FFmpeg: FFmpegNone})
	for _, name := range []string{"tiny", "large"} {
		b.Run(name, func(b *testing.B) {
			path := sharedFile(b, "models/whisper-empty/for-tests-ggml-"+name+".bin")
			rep, err := be.Load(context.Background(), plugins.LoadRequest{ModelPath: path, Device: "cpu", FlashAttention: true})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = be.Unload(context.Background()) }()
			var initTime time.Duration
			for b.Loop() {
				initTime = timeState(b, be)
			}
			b.ReportMetric(float64(be.model.stream.TotalBytes), "stream-bytes")
			var out strings.Builder
			printDensity(&out, name, rep, be.model.stream, initTime)
			fmt.Print(out.String())
		})
	}
}

// timeState is the median time to allocate and free one state.
func timeState(b *testing.B, be *Backend) time.Duration {
	var times []time.Duration
	for range 5 {
		start := time.Now()
		st, _, err := be.newState(be.model)
		if err != nil {
			b.Fatal(err)
		}
		be.freeState(st)
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	return times[len(times)/2]
}

func printDensity(out *strings.Builder, name string, whole, stream plugins.MemoryReport, initTime time.Duration) {
	const gib = float64(1 << 30)
	shared := whole.TotalBytes - stream.TotalBytes
	regrow := 6 * stream.KVSelfBytes // best_of 5: KV self at (5+2)× instead of 1×
	fmt.Fprintf(out, "\ndensity %s (CPU buffers as whisper.cpp logs them): whole instance %.1f MiB = shared %.1f MiB (weights) + one stream %.1f MiB "+
		"(kv self %.1f, cross %.1f, pad %.1f, compute %.1f; %.1f MiB more with best_of 5); state init+free %.1f ms\n",
		name, mib(whole.TotalBytes), mib(shared), mib(stream.TotalBytes), mib(stream.KVSelfBytes), mib(stream.KVCrossBytes),
		mib(stream.KVPadBytes), mib(stream.TotalBytes-stream.KVSelfBytes-stream.KVCrossBytes-stream.KVPadBytes), mib(regrow), ms(initTime))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "jobs\tN processes MiB\t1 instance MiB\tratio\tstreams/GiB N proc\tstreams/GiB 1 inst\tbest_of 5: ratio\t")
	for _, n := range []int{1, 2, 4, 8, 10} {
		procs, inst := int64(n)*whole.TotalBytes, shared+int64(n)*stream.TotalBytes
		procs5, inst5 := procs+int64(n)*regrow, inst+int64(n)*regrow
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.2f×\t%.2f\t%.2f\t%.2f×\t\n", n, mib(procs), mib(inst), float64(procs)/float64(inst),
			float64(n)*gib/float64(procs), float64(n)*gib/float64(inst), float64(procs5)/float64(inst5))
	}
	_ = tw.Flush()
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func benchThreads(b *testing.B) int {
	if v := os.Getenv("WSCHED_BENCH_THREADS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("WSCHED_BENCH_THREADS=%q", v)
		}
		return n
	}
	return 1
}

// wavSeconds is the audio's duration.
func wavSeconds(b *testing.B, wav string) float64 {
	samples, err := audio.Decoder{}.Decode(context.Background(), wav)
	if err != nil {
		b.Fatal(err)
	}
	return float64(len(samples)) / audio.SampleRate
}
