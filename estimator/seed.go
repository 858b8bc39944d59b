package estimator

import (
	"fmt"
	"strings"
)

// seed profile: the old Python system's calculator, kept so users can
// compare. Source: seed 004 "Whisper 显存计算指南" (gpu_manager.
// calculate_memory_usage):
//
//	base        = table[model][precision]            (GB)
//	audio       = base × 0.15 × segment/30 s
//	batch       = 0.2 GB + audio × batch_size
//	overhead    = (base + batch) × 0.25              ("PyTorch 开销")
//	total       = base + audio + batch + overhead
//	recommended = total × 1.2
//
// GB are taken as GiB (PyTorch's memory figures divide by 1024³). Defaults
// (not stated by the seed for every call): float16, 30 s, batch 1. Measured
// against whisper.cpp it is badly off (tiny f32: 1.5 GB of "weights" where
// whisper.cpp allocates ≈ 230 MB in all), which is why it is not the default.

var seedTable = map[string][4]float64{ // float32, float16, int8, int4
	"tiny":   {1.5, 0.8, 0.4, 0.2},
	"base":   {2.0, 1.0, 0.5, 0.25},
	"small":  {3.0, 1.5, 0.75, 0.375},
	"medium": {5.0, 2.5, 1.25, 0.625},
	"large":  {10.0, 5.0, 2.5, 1.25},
}

// seedModels is assign_optimal_model's order.
var seedModels = []string{"large", "medium", "small", "base", "tiny"}

func seedPrecision(p string) (int, string, error) {
	switch strings.ToLower(p) {
	case "float32", "fp32", "f32":
		return 0, "float32", nil
	case "", "float16", "fp16", "f16":
		return 1, "float16", nil
	case "int8", "q8_0":
		return 2, "int8", nil
	case "int4", "q4_0":
		return 3, "int4", nil
	}
	return 0, "", fmt.Errorf("estimate: seed precision %q (want float32, float16, int8, int4): %w", p, ErrUnknownPrecision)
}

func seedModel(name string) (string, bool) {
	n := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".en")
	switch n {
	case "large", "large-v1", "large-v2", "large-v3":
		return "large", true
	}
	_, ok := seedTable[n]
	return n, ok
}

func gib(x float64) int64 { return int64(x*float64(GiB) + 0.5) }

func seedFormula(req Request) (formula, error) {
	name := req.Model
	if name == "" && req.Header != nil {
		name = req.Header.Family()
	}
	model, ok := seedModel(name)
	if !ok {
		return formula{}, fmt.Errorf("estimate: seed table has no %q (tiny, base, small, medium, large[-v2|-v3]): %w", name, ErrUnknownModel)
	}
	pi, prec, err := seedPrecision(req.Precision)
	if err != nil {
		return formula{}, err
	}
	seg := req.SegmentSeconds
	if seg == 0 {
		seg = 30
	}
	base := seedTable[model][pi]
	audio := base * 0.15 * (seg / 30)
	batch := 0.2 + audio*float64(req.batch())
	overhead := (base + batch) * 0.25
	b := Breakdown{Weights: gib(base), Audio: gib(audio), Batch: gib(batch), Overhead: gib(overhead)}
	f := formula{model: model, precision: prec, breakdown: b, margin: 0.20}
	f.explain = []string{
		fmt.Sprintf("seed formula: base %.3f GB (table %s/%s) + audio %.3f GB (15%% × %.0f s/30 s) + batch %.3f GB (0.2 + audio × %d) + overhead %.3f GB (25%% of base+batch) = %.3f GB; ×1.2 recommended",
			base, model, prec, audio, seg, batch, req.batch(), overhead, base+audio+batch+overhead),
		"the seed formula is kept for comparison; it does not describe whisper.cpp (see the whisper.cpp profile)",
	}
	f.suggestions = seedSuggestions(model, pi, seg, req.batch())
	f.key = Key{Backend: Seed, Model: modelID(req, model), Precision: prec, Beam: req.decoders(), Batch: req.batch()}
	return f, nil
}

// seedSuggestions are the seed's own troubleshooting steps (减少分段长度,
// 使用更小的模型, 降低精度, 减少并发任务数), true under its formula.
func seedSuggestions(model string, pi int, seg float64, batch int) []string {
	var out []string
	if seg > 30 {
		out = append(out, fmt.Sprintf("shorter segments: %.0f s → 30 s shrinks the audio term by %.0f%%", seg, 100*(1-30/seg)))
	}
	if i := indexOf(seedModels, model); i >= 0 && i+1 < len(seedModels) {
		out = append(out, "a smaller model: "+seedModels[i+1])
	}
	if pi < 3 {
		out = append(out, fmt.Sprintf("lower precision: %s", []string{"float16", "int8", "int4"}[pi]))
	}
	if batch > 1 {
		out = append(out, "fewer concurrent items: batch 1")
	}
	return out
}

func indexOf(xs []string, s string) int {
	for i, x := range xs {
		if x == s {
			return i
		}
	}
	return -1
}
