package estimator

import (
	"fmt"
	"strings"

	"github.com/wsched/wsched/internal/units"
)

// Suggestions name only changes that lower memory for the chosen backend,
// each with what it saves under that backend's own formula.

// sizeOrder is the known models from the largest to the smallest.
var sizeOrder = []string{"large-v3", "large-v2", "large-v1", "large-v3-turbo", "medium", "small", "base", "tiny"}

// smaller returns the next smaller known model of the same kind (.en stays
// .en where one exists).
func smaller(name string) (string, bool) {
	en := strings.HasSuffix(name, ".en")
	base := strings.TrimSuffix(name, ".en")
	i := indexOf(sizeOrder, base)
	if i < 0 {
		return "", false
	}
	for _, n := range sizeOrder[i+1:] {
		if strings.HasPrefix(n, "large") {
			continue
		}
		if en {
			if _, ok := LookupModel(n + ".en"); ok {
				return n + ".en", true
			}
		}
		return n, true
	}
	return "", false
}

func saves(what string, from, to int64) string {
	return fmt.Sprintf("%s: %s → %s (saves %s)", what, units.FormatBytes(from), units.FormatBytes(to), units.FormatBytes(from-to))
}

func (e *Estimator) whisperCppSuggestions(req Request, f formula) []string {
	total := f.breakdown.Sum()
	var out []string
	try := func(what string, alt Request) {
		g, err := e.whisperCppFormula(alt)
		if err == nil && g.breakdown.Sum() < total {
			out = append(out, saves(what, total, g.breakdown.Sum()))
		}
	}
	if req.Header == nil {
		if s, ok := smaller(f.model); ok {
			alt := req
			alt.Model = s
			try("a smaller model ("+s+")", alt)
		}
		if wt, _ := whisperCppPrecision(req.Precision); !wt.Quantized() {
			for _, q := range []string{"q8_0", "q5_0"} {
				alt := req
				alt.Precision = q
				try("a quantized "+q+" model file", alt)
			}
		}
	} else if !req.Header.WeightType().Quantized() {
		out = append(out, "a quantized model file (q8_0 or q5_0 from whisper.cpp's quantize tool) shrinks the weights by 47-66%")
	}
	if req.decoders() > 1 {
		alt := req
		alt.Beam, alt.BestOf = 1, 1
		try("greedy decoding without sampled fallback (beam 1, best-of 1) keeps kv_self ×1", alt)
	}
	if req.FlashAttention != nil && !*req.FlashAttention {
		alt := req
		on := true
		alt.FlashAttention = &on
		try("flash attention (drops the encoder's n_ctx² attention matrix)", alt)
	}
	if req.Processors > 1 {
		alt := req
		alt.Processors = 1
		try("one processor instead of "+fmt.Sprint(req.Processors), alt)
	}
	return out
}

func pytorchSuggestions(req Request, b Breakdown) []string {
	out := []string{
		fmt.Sprintf("torch.cuda.empty_cache() after loading returns the fp16 checkpoint copy (%s) to the driver", units.FormatBytes(b.Transient)),
	}
	if s, ok := smaller(req.Model); ok {
		out = append(out, "a smaller model: "+s)
	}
	if req.decoders() > 1 {
		out = append(out, fmt.Sprintf("greedy decoding (beam 1, best-of 1): the kv caches shrink %d×", req.decoders()))
	}
	if req.batch() > 1 {
		out = append(out, fmt.Sprintf("batch 1: kv caches and encoder activations shrink %d×", req.batch()))
	}
	out = append(out, "the faster-whisper or whisper.cpp backend: fp16 or quantized weights instead of fp32 (see their profiles)")
	return out
}

func fasterWhisperSuggestions(req Request, prec string, b Breakdown) []string {
	var out []string
	if !strings.HasPrefix(prec, "int8") {
		out = append(out, fmt.Sprintf("compute_type int8_float16: weights %s → about %s", units.FormatBytes(b.Weights), units.FormatBytes(b.Weights*1/ct2BytesPerParam[prec])))
	}
	if s, ok := smaller(req.Model); ok {
		out = append(out, "a smaller model: "+s)
	}
	if req.decoders() > 1 {
		out = append(out, fmt.Sprintf("beam_size 1: decoder state shrinks %d×", req.decoders()))
	}
	if req.batch() > 1 {
		out = append(out, fmt.Sprintf("a smaller batch_size than %d", req.batch()))
	}
	return out
}

// LargestModel is the seed's assign_optimal_model for any backend: the
// largest known model whose RecommendedBytes fit availableBytes, with its
// estimate. When none fits it returns the smallest and fits=false (the seed
// returned "tiny" regardless). req.Model and req.Header are ignored; a
// ".en" request model keeps the choice among English-only models.
func (e *Estimator) LargestModel(req Request, availableBytes int64) (name string, res Result, fits bool, err error) {
	order := sizeOrder
	if req.Backend == Seed {
		order = seedModels
	}
	en := strings.HasSuffix(req.Model, ".en")
	req.Header = nil
	for _, n := range order {
		if en {
			if _, ok := LookupModel(n + ".en"); ok {
				n += ".en"
			} else if req.Backend != Seed {
				continue
			}
		}
		req.Model = n
		r, err := e.Estimate(req)
		if err != nil {
			return "", Result{}, false, err
		}
		name, res = n, r
		if r.RecommendedBytes <= availableBytes {
			return n, r, true, nil
		}
	}
	return name, res, false, nil
}
