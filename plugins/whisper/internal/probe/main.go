//go:build whisper

// Command probe loads one whisper.cpp model through the Go bindings (after ggml_backend_load_all),
// transcribes one WAV file on the CPU, and records what whisper.cpp itself reports about memory: its
// log lines (echoed to stderr unchanged) and, with -json, a summary with the parsed figures and every
// large posix_memalign the process made, by phase. It regenerates
// estimator/testdata/whispercpp-1.9.5 (see mk/whisper-testdata.mk) and shows the cgo a backend needs
// beyond the bindings: context parameters, reading whisper_full_params fields, log capture.
//
//	go run -tags whisper ./plugins/whisper/internal/probe -model M.bin -audio jfk.wav -variant beam5
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	whisper "github.com/ggerganov/whisper.cpp/bindings/go"

	"github.com/wsched/wsched/plugins/whisper/internal/wlog"
)

var errVariant = errors.New("unknown variant")

type options struct {
	model, audio, variant, jsonOut string
	threads                        int
	useGPU                         bool
}

// variant is one set of memory-relevant settings.
type variant struct {
	flashAttn bool
	strategy  whisper.SamplingStrategy
	beamSize  int
	// noFallback disables the temperature fallback (temperature_inc = 0). With it enabled, a failed
	// decode is retried at t > 0 with greedy.best_of decoders, and whisper_full regrows the KV cache.
	noFallback bool
}

func variants() map[string]variant {
	return map[string]variant{
		"greedy-fa-off":            {flashAttn: false, strategy: whisper.SAMPLING_GREEDY},
		"greedy-fa-on":             {flashAttn: true, strategy: whisper.SAMPLING_GREEDY},
		"greedy-nofallback-fa-off": {flashAttn: false, strategy: whisper.SAMPLING_GREEDY, noFallback: true},
		"beam5-fa-off":             {flashAttn: false, strategy: whisper.SAMPLING_BEAM_SEARCH, beamSize: 5},
		"beam5-fa-on":              {flashAttn: true, strategy: whisper.SAMPLING_BEAM_SEARCH, beamSize: 5},
	}
}

// summary is what -json writes.
type summary struct {
	WhisperVersion string           `json:"whisper_version"`
	ModelFile      string           `json:"model_file"`
	Variant        string           `json:"variant"`
	ContextParams  contextParams    `json:"context_params"`
	DefaultContext contextParams    `json:"default_context_params"`
	FullParams     fullParams       `json:"full_params"`
	Hparams        map[string]int64 `json:"hparams"`
	AllocBytes     map[string]int64 `json:"alloc_bytes,omitempty"`
	Report         *wlog.Report     `json:"log"`
	Allocs         []alloc          `json:"allocs_over_64KiB"`
	Segments       []string         `json:"segments"`
	Progress       []int            `json:"progress"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.model, "model", "", "ggml model file")
	fs.StringVar(&o.audio, "audio", "", "16 kHz mono PCM16 WAV")
	fs.StringVar(&o.variant, "variant", "greedy-fa-off", "greedy-fa-off|greedy-fa-on|greedy-nofallback-fa-off|beam5-fa-off|beam5-fa-on")
	fs.StringVar(&o.jsonOut, "json", "", "write a JSON summary to this file")
	fs.IntVar(&o.threads, "threads", 2, "CPU threads")
	fs.BoolVar(&o.useGPU, "gpu", false, "whisper_context_params.use_gpu")
	mergeDir := fs.String("merge", "", "instead of a run: merge the -json summaries in this directory into -json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mergeDir != "" {
		return merge(*mergeDir, o.jsonOut)
	}
	v, ok := variants()[o.variant]
	if !ok {
		return fmt.Errorf("variant %q: %w", o.variant, errVariant)
	}
	samples, err := readWAV(o.audio)
	if err != nil {
		return err
	}
	sink := &logSink{echo: stderr}
	restore := installLog(sink)
	defer restore()
	setPhase(phaseStart)
	loadBackends()

	s := summary{WhisperVersion: whisperVersion(), ModelFile: filepath.Base(o.model), Variant: o.variant,
		DefaultContext: defaultContextParams(), Report: wlog.NewReport()}
	s.ContextParams = contextParams{UseGPU: o.useGPU, FlashAttn: v.flashAttn}
	setPhase(phaseInit)
	wctx, err := initContext(o.model, s.ContextParams)
	if err != nil {
		return fmt.Errorf("load %s: %w", o.model, err)
	}
	defer wctx.Whisper_free()

	params := wctx.Whisper_full_default_params(v.strategy)
	params.SetThreads(o.threads)
	params.SetPrintProgress(false)
	if v.beamSize > 0 {
		params.SetBeamSize(v.beamSize)
	}
	if v.noFallback {
		params.SetTemperatureFallback(0)
	}
	s.FullParams = readFullParams(&params)

	setPhase(phaseFull)
	fmt.Fprintf(stderr, "probe: whisper_full strategy=%s beam_size=%d best_of=%d temperature_inc=%g flash_attn=%v\n",
		s.FullParams.Strategy, s.FullParams.BeamSize, s.FullParams.BestOf, s.FullParams.TemperatureInc, v.flashAttn)
	err = wctx.Whisper_full(params, samples,
		func() bool { return ctx.Err() == nil },
		func(n int) {
			total := wctx.Whisper_full_n_segments()
			for i := total - n; i < total; i++ {
				s.Segments = append(s.Segments, wctx.Whisper_full_get_segment_text(i))
			}
		},
		func(p int) { s.Progress = append(s.Progress, p) })
	if err != nil {
		return fmt.Errorf("transcribe %s: %w", o.audio, err)
	}
	fmt.Fprintf(stdout, "%s\n", strings.TrimSpace(strings.Join(s.Segments, "")))

	for _, line := range sink.take() {
		s.Report.Add(line)
	}
	s.Allocs = allocs()
	derive(&s)
	for _, a := range s.Allocs {
		fmt.Fprintf(stderr, "probe: posix_memalign phase=%s bytes=%d\n", a.Phase, a.Bytes)
	}
	if o.jsonOut == "" {
		return nil
	}
	return writeJSON(o.jsonOut, s)
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}
