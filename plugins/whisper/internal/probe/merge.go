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

// merge combines the per-run summaries in dir (*.json other than out) into out, sorted by model
// file and variant so regenerating gives a stable diff.
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
			"values: every other 'name = value' line (hparams: n_vocab ... ftype, qntvr, type; context params).",
			"allocs_over_64KiB: each posix_memalign >= 64 KiB with the phase it happened in: init =",
			"whisper_init_from_file_with_params (model buffer, kv self/cross/pad, compute buffers without their",
			"host-side graph metadata), full = whisper_full (the self-attention KV cache whisper_full recreates,",
			"unlogged, with n_decoders+2 times the cells when it needs more than one decoder).",
			"Regenerate: make whisper-testdata (mk/whisper-testdata.mk).",
		},
		MB: "10^6 bytes: src/whisper.cpp prints size/1e6 with %7.2f",
	}
	for _, p := range paths {
		if filepath.Clean(p) == filepath.Clean(out) {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		var s summary
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("merge %s: %w", p, err)
		}
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
