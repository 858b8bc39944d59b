//go:build whisper

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// testdata is the layout of estimator/testdata/whispercpp-1.9.5/buffers.json.
type testdata struct {
	Comment []string  `json:"comment"`
	MB      string    `json:"mb"`
	Runs    []summary `json:"runs"`
}

// hparamNames are the whisper_model_load lines that hold the file's hyperparameters.
func hparamNames() []string {
	return []string{"n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_ctx",
		"n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype", "qntvr"}
}

// initBufferOrder is the order whisper_init_from_file_with_params makes its large allocations in when
// the model has one weight buffer: two ggml contexts for tensor metadata, the weights, then
// whisper_init_state's KV caches and compute buffers (without their host-side graph metadata).
func initBufferOrder() []string {
	return []string{"tensor_meta_ctx", "tensor_meta_ctx_buft", "model_buffer", "kv_self", "kv_cross", "kv_pad",
		"compute_conv", "compute_encode", "compute_cross", "compute_decode"}
}

// derive fills Hparams from the log and names the allocations when their count matches the known order.
func derive(s *summary) {
	s.Hparams = map[string]int64{}
	for _, name := range hparamNames() {
		if v, ok := s.Report.Int(name); ok {
			s.Hparams[name] = v
		}
	}
	var init, full []int64
	for _, a := range s.Allocs {
		switch a.Phase {
		case "init":
			init = append(init, a.Bytes)
		case "full":
			full = append(full, a.Bytes)
		}
	}
	order := initBufferOrder()
	if len(init) != len(order) || len(full) > 1 {
		s.AllocBytes = nil
		return
	}
	s.AllocBytes = map[string]int64{}
	for i, name := range order {
		s.AllocBytes[name] = init[i]
	}
	if len(full) == 1 {
		s.AllocBytes["kv_self_regrown_in_full"] = full[0]
	}
}

// merge combines the run summaries in dir (per-run *.json files, and the runs of an earlier merged
// file, out included; a per-run file wins) into out, sorted by model file and variant so regenerating
// gives a stable diff.
func merge(dir, out string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	td := testdata{
		Comment: []string{
			"whisper.cpp 1.9.5 (Debian libwhisper1 1.9.5+dfsg-1, libggml0 0.27.0-1), CPU backend, 2 threads,",
			"for-tests-ggml-*.bin (real hparams and vocabularies, no tensors) transcribing jfk.wav.",
			"sizes: every 'name = x MB' line whisper.cpp logged, as printed and in bytes (printed x 10^6, +-5000).",
			"values: every other 'name = value' line (hparams: n_vocab ... ftype, qntvr, type; context params);",
			"hparams: the integer hparams from those lines.",
			"allocs_over_64KiB: each posix_memalign >= 64 KiB with the phase it happened in: init =",
			"whisper_init_from_file_with_params (model buffer, kv self/cross/pad, compute buffers without their",
			"host-side graph metadata), full = whisper_full (the self-attention KV cache whisper_full recreates,",
			"unlogged, with n_decoders+2 times the cells when it needs more than one decoder).",
			"alloc_bytes: the same allocations named in whisper.cpp's order (kv_self_regrown_in_full: the full one).",
			"Regenerate: make whisper-testdata (mk/whisper-testdata.mk).",
		},
		MB: "10^6 bytes: src/whisper.cpp prints size/1e6 with %7.2f",
	}
	byRun := map[[2]string]summary{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		var prev testdata
		if err := json.Unmarshal(data, &prev); err == nil && prev.Runs != nil {
			for _, s := range prev.Runs {
				if _, ok := byRun[[2]string{s.ModelFile, s.Variant}]; !ok {
					byRun[[2]string{s.ModelFile, s.Variant}] = s
				}
			}
			continue
		}
		var s summary
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("merge %s: %w", p, err)
		}
		byRun[[2]string{s.ModelFile, s.Variant}] = s
	}
	for _, s := range byRun {
		derive(&s)
		td.Runs = append(td.Runs, s)
	}
	sort.Slice(td.Runs, func(i, j int) bool {
		a, b := td.Runs[i], td.Runs[j]
		if a.ModelFile != b.ModelFile {
			return a.ModelFile < b.ModelFile
		}
		return a.Variant < b.Variant
	})
	return writeJSON(out, td)
}
