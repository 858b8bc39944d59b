//go:build whisper

package whisper

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	wcpp "github.com/ggerganov/whisper.cpp/bindings/go"
	"github.com/hashicorp/go-hclog"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/simtest"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/host"
	"github.com/wsched/wsched/plugins/internal/audio"
	"github.com/wsched/wsched/plugins/plugintest"
)

// BenchmarkOverhead transcribes with tiny.en (weightless: the full encoder
// and decoder graphs run on zeros) on the CPU four ways, each warm:
//
//   - bindings: the Go bindings alone in this process (Whisper_init,
//     Whisper_full), reading the WAV file each time as a caller must;
//   - backend: this package's Backend called directly (its audio decoder,
//     callbacks, log capture and cancellation watch);
//   - plugin: the wsched-backend-whisper binary exec'ed once and loaded
//     once, called over go-plugin gRPC with AutoMTLS (plugins.ClientConfig);
//   - host: the same binary run by plugins/host under a CPU lease of a
//     placement engine, Acquire/Transcribe/release per transcription, as the
//     daemon's job executor does.
//
// Sub-benchmark jfk is jfk.wav (11 s, one 30 s window); short is 50 ms of
// silence, which whisper_full returns from right after the mel spectrogram
// ("input is too short"), so it shows the fixed cost per call of each path
// without the compute noise. Each iteration runs all four paths, starting
// with a different one each time so that drift on a shared machine favours
// none; each path's median is reported as a metric and printed side by side
// with its ratio to the bindings (the ratio of the minima is the steadier
// figure on a busy machine):
//
//	make plugins-bench    (go test -tags whisper -run '^$' -bench Overhead -benchtime 10x ./plugins/whisper/)
func BenchmarkOverhead(b *testing.B) {
	model := tinyEN(b)
	threads := min(4, runtime.NumCPU())
	impl := New(Options{FFmpeg: FFmpegNone}) // also registers ggml's backends for the bindings
	bin := buildBackend(b)
	backends := []struct {
		name string
		be   plugins.Backend
	}{{"backend", impl}, {"plugin", startPlugin(b, bin)}}
	for _, x := range backends {
		load(b, x.be, model, threads)
	}
	h := startHost(b, bin)
	ctx := bindingsContext(b, model)
	short := writeTempFile(b, "short.wav", pcm16WAV(16000, 1, make([]float32, 800)))
	for _, clip := range []struct{ name, wav string }{{"jfk", jfk(b)}, {"short", short}} {
		paths := []benchPath{
			{name: "bindings", run: bindingsTranscriber(ctx, clip.wav, threads)},
			{name: "backend", run: transcriber(backends[0].be, clip.wav)},
			{name: "plugin", run: transcriber(backends[1].be, clip.wav)},
			{name: "host", run: hostTranscriber(h, model, clip.wav, threads)},
		}
		b.Run(clip.name, func(b *testing.B) { runPaths(b, paths, clip.name, threads) })
	}
}

// runPaths measures paths in rotating order and reports them.
func runPaths(b *testing.B, paths []benchPath, clip string, threads int) {
	for i := range paths {
		paths[i].run(b) // warm-up: the first call regrows the KV cache
	}
	round := 0
	for b.Loop() {
		for k := range paths {
			p := &paths[(round+k)%len(paths)]
			start := time.Now()
			p.run(b)
			p.times = append(p.times, time.Since(start))
		}
		round++
	}
	for _, p := range paths {
		b.ReportMetric(ms(p.median()), p.name+"-ms/op")
	}
	printTable(paths, clip, threads)
}

// benchPath is one way to transcribe and its measured times.
type benchPath struct {
	name  string
	run   func(*testing.B)
	times []time.Duration
}

func (p benchPath) median() time.Duration {
	t := slices.Clone(p.times)
	slices.Sort(t)
	return t[len(t)/2]
}

// bindingsContext loads model with the bindings' defaults (flash
// attention on).
func bindingsContext(b *testing.B, model string) *wcpp.Context {
	ctx := wcpp.Whisper_init(model)
	if ctx == nil {
		b.Fatal("Whisper_init failed")
	}
	b.Cleanup(ctx.Whisper_free)
	return ctx
}

// bindingsTranscriber is the baseline: greedy defaults, no callbacks.
func bindingsTranscriber(ctx *wcpp.Context, wav string, threads int) func(*testing.B) {
	return func(b *testing.B) {
		samples, err := audio.Decoder{}.Decode(context.Background(), wav)
		if err != nil {
			b.Fatal(err)
		}
		p := ctx.Whisper_full_default_params(wcpp.SAMPLING_GREEDY)
		p.SetThreads(threads)
		p.SetPrintProgress(false)
		if err := ctx.Whisper_full(p, samples, nil, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// load loads model into be (flash attention on, like the bindings' default).
func load(b *testing.B, be plugins.Backend, model string, threads int) {
	ctx := context.Background()
	if _, err := be.Load(ctx, plugins.LoadRequest{ModelPath: model, Device: "cpu", Threads: threads, FlashAttention: true}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = be.Unload(ctx) })
}

// transcriber transcribes wav through a loaded backend.
func transcriber(be plugins.Backend, wav string) func(*testing.B) {
	return func(b *testing.B) {
		if _, err := be.Transcribe(context.Background(), plugins.TranscribeRequest{AudioPath: wav}, func(plugins.Event) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// buildBackend compiles cmd/wsched-backend-whisper into a fresh directory
// (mode 0700, ours: a plugin directory the host accepts).
func buildBackend(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "wsched-backend-whisper")
	cmd := exec.Command("go", "build", "-tags", "whisper", "-o", bin, "github.com/wsched/wsched/cmd/wsched-backend-whisper")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startPlugin execs bin as the host would and returns the backend.
func startPlugin(b *testing.B, bin string) plugins.Backend {
	be, _ := plugintest.Start(b, exec.Command(bin), os.Stderr, hclog.Warn)
	return be
}

// startHost runs a placement engine (one simulated GPU) and a host whose
// plugin directory holds bin.
func startHost(b *testing.B, bin string) *host.Host {
	eng, _ := simtest.Engine(b, simtest.GPUs(24*units.GiB), nil)
	bc := config.Defaults().Backends
	bc.PluginDir, bc.DevDirs = filepath.Dir(bin), nil
	h := host.New(host.Options{Config: bc, Leases: eng})
	ctx, cancel := context.WithCancel(context.Background())
	hostDone := make(chan struct{})
	go func() { _ = h.Run(ctx); close(hostDone) }()
	b.Cleanup(func() { cancel(); <-hostDone })
	return h
}

// hostTranscriber transcribes through a warm host instance under a CPU
// lease: Acquire, Transcribe, release.
func hostTranscriber(h *host.Host, model, wav string, threads int) func(*testing.B) {
	spec := host.Spec{
		Backend:   Name,
		Load:      plugins.LoadRequest{ModelPath: model, Threads: threads, FlashAttention: true},
		Device:    device.Spec{Kind: device.CPU},
		KeepAlive: time.Hour,
	}
	return func(b *testing.B) {
		inst, release, err := h.Acquire(b.Context(), spec)
		if err != nil {
			b.Fatal(err)
		}
		defer release()
		if _, err := inst.Transcribe(b.Context(), plugins.TranscribeRequest{AudioPath: wav}, func(plugins.Event) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// printTable writes the side-by-side table to stdout (a parent
// benchmark's b.Log is not shown).
func printTable(paths []benchPath, clip string, threads int) {
	base, baseMin := paths[0].median(), slices.Min(paths[0].times)
	var out strings.Builder
	fmt.Fprintf(&out, "\n%s: for-tests-ggml-tiny.en.bin, CPU, %d threads, flash attention on, warm; %d rounds:\n", clip, threads, len(paths[0].times))
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\tmedian ms\tmin ms\tmax ms\tratio (median)\tratio (min)\t")
	for _, p := range paths {
		m, lo := p.median(), slices.Min(p.times)
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.3f\t%.3f\t\n", p.name, ms(m), ms(lo), ms(slices.Max(p.times)),
			float64(m)/float64(base), float64(lo)/float64(baseMin))
	}
	_ = tw.Flush()
	fmt.Print(out.String())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
