package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/estimator"
)

// testModels is whisper.cpp's for-tests models (headers and vocabularies,
// no weights), beside the repository.
const testModels = "../../../shared/models/whisper-empty"

// estimateJSON runs `wsched estimate --json` and decodes its output; fields
// the view does not know fail the decoding.
func estimateJSON(t *testing.T, args ...string) estimateView {
	t.Helper()
	out, _, err := runCLI(t, nil, append([]string{"estimate", "--json", "--config", seedSim}, args...)...)
	if err != nil {
		t.Fatalf("estimate %v: %v", args, err)
	}
	var v estimateView
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("estimate %v --json does not decode: %v\n%s", args, err, out)
	}
	return v
}

func TestEstimateTextWhisperCppVersusSeed(t *testing.T) {
	for _, tc := range []struct {
		backend string
		want    []string
	}{
		{"whisper.cpp", []string{
			"backend      whisper.cpp\nmodel        medium (f16)\ntotal        2.31 GiB (formula)\nrecommended  2.54 GiB\n",
			"breakdown      weights       1.43 GiB\n",
			"               cuda_runtime  90.62 MiB\n",
			"               context       400.00 MiB\n",
			"gpu 0 (NVIDIA GeForce RTX 4090): 819.71 MiB available, insufficient, 0 copies\n",
			"gpu 1 (NVIDIA GeForce RTX 4090): 21.80 GiB available, sufficient, 8 copies\n",
			"gpu 2 (NVIDIA GeForce RTX 4090): 6.61 GiB available, sufficient, 2 copies\n",
			"  - a quantized q5_0 model file: 2.31 GiB → 1.48 GiB (saves 851.60 MiB)\n",
		}},
		{"seed", []string{
			"backend      seed\nmodel        medium (float16)\ntotal        4.22 GiB (formula)\nrecommended  5.06 GiB\n",
			"breakdown      weights   2.50 GiB\n               audio     384.00 MiB\n               batch     588.80 MiB\n               overhead  787.20 MiB\n",
			"gpu 1 (NVIDIA GeForce RTX 4090): 21.80 GiB available, sufficient, 4 copies\n",
			"gpu 2 (NVIDIA GeForce RTX 4090): 6.61 GiB available, sufficient, 1 copy\n",
			"  - lower precision: int8\n",
		}},
	} {
		out, _, err := runCLI(t, nil, "estimate", "--model", "medium", "--backend", tc.backend, "--config", seedSim)
		if err != nil {
			t.Fatalf("%s: %v", tc.backend, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.backend, w, out)
			}
		}
		if n := strings.Count(out, "\ngpu "); n != 8 {
			t.Errorf("%s: %d GPU lines, want 8", tc.backend, n)
		}
	}
}

// TestEstimateJSONShape checks the promised fields and that the GPU
// columns use the accounting formula that `wsched gpus` shows.
func TestEstimateJSONShape(t *testing.T) {
	out, _, err := runCLI(t, nil, "estimate", "--json", "--model", "small", "--config", seedSim)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"backend", "model", "total_bytes", "recommended_bytes", "breakdown", "gpus", "suggestions"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in --json output", k)
		}
	}
	bd, _ := m["breakdown"].(map[string]any)
	for _, k := range []string{"weights", "kv_self", "kv_cross", "kv_pad", "compute", "context"} {
		if _, ok := bd[k]; !ok {
			t.Errorf("breakdown lacks %q", k)
		}
	}
	gpusOut, _, err := runCLI(t, nil, "gpus", "--json", "--config", seedSim)
	if err != nil {
		t.Fatal(err)
	}
	var gv gpusView
	if err := json.Unmarshal([]byte(gpusOut), &gv); err != nil {
		t.Fatal(err)
	}
	v := estimateJSON(t, "--model", "small")
	if v.Breakdown.Sum() != v.TotalBytes || len(v.GPUs) != len(gv.GPUs) {
		t.Fatalf("sum %d total %d, %d GPUs of %d", v.Breakdown.Sum(), v.TotalBytes, len(v.GPUs), len(gv.GPUs))
	}
	for i, g := range v.GPUs {
		acc := gv.GPUs[i].Accounting
		if g.Index != acc.Index || g.AvailableBytes != acc.AvailableOrZero() {
			t.Errorf("gpu %d: available %d, gpus shows %d", g.Index, g.AvailableBytes, acc.AvailableOrZero())
		}
		if g.Copies != g.AvailableBytes/v.RecommendedBytes || g.Sufficient != (g.Copies > 0) {
			t.Errorf("gpu %d: %d copies, sufficient %v for %d of %d", g.Index, g.Copies, g.Sufficient, v.RecommendedBytes, g.AvailableBytes)
		}
	}
}

func TestEstimateOptions(t *testing.T) {
	tiny := estimateJSON(t, "--model", "tiny", "--gpu", "1")
	for _, tc := range []struct {
		name  string
		args  []string
		check func(estimateView) bool
	}{
		{"one GPU", []string{"--model", "tiny", "--gpu", "6"}, func(v estimateView) bool {
			return len(v.GPUs) == 1 && v.GPUs[0].Index == 6
		}},
		{"beam 5 re-allocates kv_self ×7 and suggests greedy", []string{"--model", "tiny", "--gpu", "1", "--beam", "5"}, func(v estimateView) bool {
			return v.Breakdown.KVSelf == 7*tiny.Breakdown.KVSelf && hasSuggestion(v, "greedy")
		}},
		{"best-of counts like beam", []string{"--model", "tiny", "--gpu", "1", "--best-of", "5"}, func(v estimateView) bool {
			return v.Breakdown.KVSelf == 7*tiny.Breakdown.KVSelf && v.Key.Beam == 5
		}},
		{"no flash attention: bigger encode buffer, suggested", []string{"--model", "tiny", "--gpu", "1", "--flash-attn=false"}, func(v estimateView) bool {
			return v.Breakdown.ComputeEncode > tiny.Breakdown.ComputeEncode && hasSuggestion(v, "flash attention")
		}},
		{"two processors", []string{"--model", "tiny", "--gpu", "1", "--processors", "2"}, func(v estimateView) bool {
			return v.Breakdown.KVCross == 2*tiny.Breakdown.KVCross && v.Breakdown.Weights == tiny.Breakdown.Weights && hasSuggestion(v, "one processor")
		}},
		{"segment changes nothing for whisper.cpp and is never suggested", []string{"--model", "tiny", "--gpu", "1", "--segment", "600s", "--batch", "4"}, func(v estimateView) bool {
			return v.TotalBytes == tiny.TotalBytes && !hasSuggestion(v, "segment")
		}},
		{"cuda context flag", []string{"--model", "tiny", "--gpu", "1", "--cuda-context", "1GiB"}, func(v estimateView) bool {
			return v.Breakdown.Context == estimator.GiB
		}},
		{"quantized precision", []string{"--model", "tiny", "--gpu", "1", "--precision", "q5_0"}, func(v estimateView) bool {
			return v.Precision == "q5_0" && v.Breakdown.Weights < tiny.Breakdown.Weights/2
		}},
		{"faster-whisper int8", []string{"--model", "large-v3", "--backend", "faster-whisper", "--precision", "int8"}, func(v estimateView) bool {
			return v.Backend == estimator.FasterWhisper && v.Precision == "int8" && len(v.GPUs) == 8
		}},
		{"pytorch alias", []string{"--model", "turbo", "--backend", "openai-whisper"}, func(v estimateView) bool {
			return v.Backend == estimator.PyTorch && v.Model == "large-v3-turbo" && v.Breakdown.Transient > 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v := estimateJSON(t, tc.args...); !tc.check(v) {
				b, _ := json.Marshal(v)
				t.Errorf("%v: %s", tc.args, b)
			}
		})
	}
}

func hasSuggestion(v estimateView, word string) bool {
	for _, s := range v.Suggestions {
		if strings.Contains(s, word) {
			return true
		}
	}
	return false
}

// TestEstimateSegmentForms: "60" and "1m" are the same segment for the seed.
func TestEstimateSegmentForms(t *testing.T) {
	a := estimateJSON(t, "--model", "base", "--backend", "seed", "--segment", "60")
	b := estimateJSON(t, "--model", "base", "--backend", "seed", "--segment", "1m")
	c := estimateJSON(t, "--model", "base", "--backend", "seed")
	// The seed's GB figures are rounded to bytes one by one: allow 1 B.
	if d := a.Breakdown.Audio - 2*c.Breakdown.Audio; a.TotalBytes != b.TotalBytes || d < -1 || d > 1 {
		t.Errorf("60: %d, 1m: %d; audio %d vs 30 s %d", a.TotalBytes, b.TotalBytes, a.Breakdown.Audio, c.Breakdown.Audio)
	}
}

// TestEstimateModelFiles reads every for-tests model: the weights are the
// file's, the learning key is its cheap identity (head digest + size), the
// sha256 is shown, and the estimate equals the known
// model's (the files are those models without their weights).
func TestEstimateModelFiles(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testModels, "for-tests-ggml-*.bin"))
	if len(files) == 0 {
		t.Skipf("no for-tests models under %s (the repository's ../shared/models/whisper-empty)", testModels)
	}
	known := map[string]string{"large": "large-v2"}
	for _, path := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "for-tests-ggml-"), ".bin")
		t.Run(name, func(t *testing.T) {
			v := estimateJSON(t, "--model", path, "--gpu", "1")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			mf := v.ModelFile
			if mf == nil || mf.SHA256 != hex.EncodeToString(sum[:]) || v.Key.Model != mf.ModelID || !strings.HasPrefix(mf.ModelID, "head:") || !mf.Empty {
				t.Fatalf("model_file %+v, key %+v", mf, v.Key)
			}
			if v.Breakdown.Weights < mf.WeightBytes || v.Model != filepath.Base(path) {
				t.Errorf("weights %d < file's %d, model %q", v.Breakdown.Weights, mf.WeightBytes, v.Model)
			}
			ref := name
			if k, ok := known[name]; ok {
				ref = k
			}
			byName := estimateJSON(t, "--model", ref, "--gpu", "1")
			if v.TotalBytes != byName.TotalBytes || v.Breakdown != byName.Breakdown {
				t.Errorf("file total %d, %s by name %d", v.TotalBytes, ref, byName.TotalBytes)
			}
		})
	}
}

// TestEstimateModelFileOtherBackends: a ggml file lends its dimensions to
// the other profiles, which name the model by its family and do not hash.
func TestEstimateModelFileOtherBackends(t *testing.T) {
	path := filepath.Join(testModels, "for-tests-ggml-medium.bin")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no for-tests model: %v", err)
	}
	for _, b := range []string{"seed", "pytorch", "faster-whisper"} {
		v := estimateJSON(t, "--model", path, "--backend", b)
		byName := estimateJSON(t, "--model", "medium", "--backend", b)
		if v.Model != "medium" || v.TotalBytes != byName.TotalBytes || v.ModelFile == nil || v.ModelFile.SHA256 != "" {
			t.Errorf("%s: model %q total %d (by name %d), file %+v", b, v.Model, v.TotalBytes, byName.TotalBytes, v.ModelFile)
		}
	}
}

func TestEstimateFits(t *testing.T) {
	v := estimateJSON(t, "--fits", "8GiB")
	if v.Result != nil || len(v.Largest) != 1 {
		t.Fatalf("--fits alone: %+v", v)
	}
	l := v.Largest[0]
	if l.Model != "large-v3" || !l.Fits || l.RecommendedBytes > 8*estimator.GiB || l.GPU != nil {
		t.Errorf("8 GiB: %+v", l)
	}
	v = estimateJSON(t, "--fits", "gpus", "--backend", "seed")
	want := []string{"tiny", "large", "medium", "large", "tiny", "large", "large", "large"}
	fits := []bool{false, true, true, true, false, true, true, true}
	if len(v.Largest) != len(want) {
		t.Fatalf("seed per GPU: %+v", v.Largest)
	}
	for i, l := range v.Largest {
		if l.GPU == nil || *l.GPU != i || l.Model != want[i] || l.Fits != fits[i] || l.Fits != (l.RecommendedBytes <= l.AvailableBytes) {
			t.Errorf("gpu %d: %+v, want %s fits %v", i, l, want[i], fits[i])
		}
	}
	out, _, err := runCLI(t, nil, "estimate", "--model", "medium", "--precision", "q5_0", "--fits", "gpus", "--gpu", "0", "--config", seedSim)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"largest model that fits (whisper.cpp, q5_0):\n", "  gpu 0, 819.71 MiB available: tiny (recommended 796.23 MiB)\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestEstimateExplain(t *testing.T) {
	out, _, err := runCLI(t, nil, "estimate", "--model", "base", "--explain", "--gpu", "1", "--config", seedSim)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"explain:\n",
		"  - whisper.cpp 1.9.5 would log: model 147.37 MB",
		`  - learning key: "whisper.cpp"|"base"|"f16"|"1"|"1"|"NVIDIA GeForce RTX 4090"`,
		"  - learning: no daemon answered on ",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestEstimateWithoutGPUs: provider none gives no GPU columns, and
// [estimator] cuda_context sets the context term.
func TestEstimateWithoutGPUs(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "wsched.toml")
	if err := os.WriteFile(cfg, []byte("[inventory]\nprovider = \"none\"\n[estimator]\ncuda_context = \"512MiB\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, nil, "estimate", "--model", "tiny", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"               context       512.00 MiB\n", "gpus: none found"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	_, _, err = runCLI(t, nil, "estimate", "--model", "tiny", "--gpu", "0", "--config", cfg)
	if err == nil || !strings.Contains(err.Error(), "--gpu 0: no such GPU (GPUs: none)") {
		t.Errorf("--gpu without GPUs: %v", err)
	}
}

func TestEstimateErrors(t *testing.T) {
	dir := t.TempDir()
	gguf := filepath.Join(dir, "model.gguf")
	if err := os.WriteFile(gguf, []byte("GGUF\x03\x00\x00\x00 not whisper"), 0o600); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.bin")
	head := binary.LittleEndian.AppendUint32(nil, 0x67676d6c)
	head = binary.LittleEndian.AppendUint32(head, 51865)
	if err := os.WriteFile(truncated, head, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
		is   error
	}{
		{"no model", nil, []string{"--model NAME|PATH is required"}, nil},
		{"unknown model lists known", []string{"--model", "huge"},
			[]string{`model "huge"`, "tiny, tiny.en, base", "large-v3-turbo"}, estimator.ErrUnknownModel},
		{"unknown backend lists allowed", []string{"--model", "tiny", "--backend", "vllm"},
			[]string{`unknown backend "vllm" (allowed: whisper.cpp, pytorch, faster-whisper, seed, sherpa-onnx)`}, estimator.ErrUnknownBackend},
		{"not a ggml file", []string{"--model", gguf},
			[]string{gguf + " is not a whisper.cpp ggml model file", "bad magic", "known model name: tiny"}, nil},
		{"truncated ggml file", []string{"--model", truncated}, []string{"read model file", "truncated"}, nil},
		{"missing file", []string{"--model", filepath.Join(dir, "ggml-nope.bin")}, []string{"does not exist", "known model names: tiny"}, nil},
		{"directory", []string{"--model", dir}, []string{"is a directory"}, nil},
		{"no such GPU", []string{"--model", "tiny", "--gpu", "9"}, []string{"--gpu 9: no such GPU (GPUs: 0, 1, 2, 3, 4, 5, 6, 7)"}, nil},
		{"bad precision", []string{"--model", "tiny", "--precision", "q7"}, []string{`precision "q7"`}, estimator.ErrUnknownPrecision},
		{"seed lacks turbo", []string{"--model", "turbo", "--backend", "seed"}, []string{"seed table has no"}, estimator.ErrUnknownModel},
		{"fits without unit", []string{"--fits", "8"}, []string{"--fits", "missing unit"}, nil},
		{"negative segment", []string{"--model", "tiny", "--segment", "-5"}, []string{"non-negative"}, nil},
		{"negative beam", []string{"--model", "tiny", "--beam", "-1"}, []string{"out of range"}, estimator.ErrBadRequest},
		{"negative concurrency", []string{"--model", "tiny", "--concurrency", "-1"}, []string{"estimate: --concurrency -1: want 1 to 256"}, estimator.ErrBadRequest},
		{"concurrency over max_streams' limit", []string{"--model", "tiny", "--concurrency", "257"}, []string{"estimate: --concurrency 257: want 1 to 256"}, estimator.ErrBadRequest},
		{"positional argument", []string{"medium"}, []string{"unknown command"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, nil, append([]string{"estimate", "--config", seedSim}, tc.args...)...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %v", err, tc.is)
			}
		})
	}
}
