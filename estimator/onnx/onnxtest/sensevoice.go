package onnxtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// SenseVoice shapes: 80 fbank bins stacked over an LFR window of 7 frames
// (shift 6) give the 560 features per frame sherpa-onnx feeds the model.
const (
	SenseVoiceFeatures = 560
	lfrWindow          = 7
	lfrShift           = 6
)

// SenseVoiceOptions shape a generated SenseVoice model.
type SenseVoiceOptions struct {
	// Vocab is the number of tokens (and logits per frame); at least 24.
	// 0 means 64.
	Vocab int
	// Seed seeds the random weights.
	Seed uint64
	// Int8 names the file model.int8.onnx instead of model.onnx.
	Int8 bool
	// Drop leaves these metadata keys out (to test what checks them).
	Drop []string
}

// WriteSenseVoice writes into dir a model with SenseVoice's interface as
// sherpa-onnx v1.12.0 checks it (sherpa-onnx/csrc/offline-sense-voice-
// model.cc, offline-recognizer-sense-voice-impl.h): inputs x (float,
// [N, T, 560]), x_length, language and text_norm (int32, [N]); one output,
// logits (float, [N, T+4, V]) — SenseVoice prepends four query frames
// (language, emotion, event, ITN) and sherpa-onnx's CTC decoder reads T+4
// frames; and every metadata_props key sherpa-onnx reads (vocab_size,
// lfr_window_size/shift, normalize_samples, with_itn, without_itn,
// lang_auto … lang_yue, neg_mean, inv_stddev). The network is x padded
// with four zero frames times a random [560, V] matrix. tokens.txt gets V
// "symbol id" lines. It returns the model file's path.
func WriteSenseVoice(dir string, o SenseVoiceOptions) (string, error) {
	if o.Vocab == 0 {
		o.Vocab = 64
	}
	if o.Vocab < 24 {
		return "", fmt.Errorf("onnxtest: vocab %d: want at least 24", o.Vocab)
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5e15e))
	w := make([]float32, SenseVoiceFeatures*o.Vocab)
	for i := range w {
		w[i] = float32(rng.NormFloat64()) * 0.05
	}
	m := Model{IRVersion: 8, Opset: 13, Graph: senseVoiceGraph(o.Vocab, w), Metadata: senseVoiceMetadata(o.Vocab, o.Drop)}
	name := "model.onnx"
	if o.Int8 {
		name = "model.int8.onnx"
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, m.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("onnxtest: write model: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens.txt"), []byte(Tokens(o.Vocab)), 0o644); err != nil {
		return "", fmt.Errorf("onnxtest: write tokens: %w", err)
	}
	return path, nil
}

func senseVoiceGraph(vocab int, w []float32) Graph {
	return Graph{
		Name: "sensevoice-shaped",
		Nodes: []Node{
			{Op: "Pad", Inputs: []string{"x", "pads"}, Output: []string{"x_padded"}},
			{Op: "MatMul", Inputs: []string{"x_padded", "weight"}, Output: []string{"logits"}},
		},
		Initializers: []Tensor{
			{Name: "weight", DataType: Float, Dims: []int64{SenseVoiceFeatures, int64(vocab)}, Raw: Floats(w)},
			// four zero frames before the first: [N, T, F] → [N, 4+T, F]
			{Name: "pads", DataType: Int64, Dims: []int64{6}, Raw: Int64s(0, 4, 0, 0, 0, 0)},
		},
		Inputs: []Value{
			{Name: "x", ElemType: Float, Dims: []any{"N", "T", SenseVoiceFeatures}},
			{Name: "x_length", ElemType: Int32, Dims: []any{"N"}},
			{Name: "language", ElemType: Int32, Dims: []any{"N"}},
			{Name: "text_norm", ElemType: Int32, Dims: []any{"N"}},
		},
		Outputs: []Value{{Name: "logits", ElemType: Float, Dims: []any{"N", "T4", vocab}}},
	}
}

// senseVoiceMetadata is the real model's metadata, with its ids.
func senseVoiceMetadata(vocab int, drop []string) [][2]string {
	neg := make([]string, SenseVoiceFeatures)
	inv := make([]string, SenseVoiceFeatures)
	for i := range neg {
		neg[i], inv[i] = "-8.0", "0.25"
	}
	all := [][2]string{
		{"model_type", "sense_voice_ctc"}, {"model_author", "wsched onnxtest (random weights)"},
		{"vocab_size", strconv.Itoa(vocab)},
		{"lfr_window_size", strconv.Itoa(lfrWindow)}, {"lfr_window_shift", strconv.Itoa(lfrShift)},
		{"normalize_samples", "0"}, {"with_itn", "14"}, {"without_itn", "15"},
		{"lang_auto", "0"}, {"lang_zh", "3"}, {"lang_en", "4"}, {"lang_yue", "7"}, {"lang_ja", "11"}, {"lang_ko", "12"},
		{"neg_mean", strings.Join(neg, ",")}, {"inv_stddev", strings.Join(inv, ",")},
	}
	return slices.DeleteFunc(all, func(kv [2]string) bool { return slices.Contains(drop, kv[0]) })
}

// Tokens is a tokens.txt of n entries: SenseVoice's special tokens first,
// then word pieces (one CJK character among them, as in the real
// vocabulary, so sherpa-onnx does not take it for byte-level BPE).
func Tokens(n int) string {
	special := []string{"<unk>", "<s>", "</s>", "<|zh|>", "<|en|>", "<|nospeech|>", "<|withitn|>", "<|yue|>",
		"<|HAPPY|>", "<|NEUTRAL|>", "<|Speech|>", "<|ja|>", "<|ko|>", "<|BGM|>", "<|woitn|>", "<|EMO_UNKNOWN|>"}
	words := []string{"▁and", "▁so", "▁my", "▁fellow", "▁americans", "▁ask", "▁not", "▁what", "的", "▁you", "▁can", "▁do", "▁for", "▁your", "▁country"}
	var b strings.Builder
	for i := range n {
		var sym string
		switch {
		case i < len(special):
			sym = special[i]
		case i-len(special) < len(words):
			sym = words[i-len(special)]
		default:
			sym = fmt.Sprintf("▁w%d", i)
		}
		fmt.Fprintf(&b, "%s %d\n", sym, i)
	}
	return b.String()
}

// WriteParaformer writes into dir a model with Paraformer's interface as
// sherpa-onnx v1.12.0 checks it (offline-paraformer-model.cc,
// offline-recognizer-paraformer-impl.h): inputs speech (float, [N, T, 560])
// and speech_lengths (int32, [N]); outputs logits (float, [N, T, V]) and
// token_num; metadata vocab_size, lfr_window_size/shift, neg_mean,
// inv_stddev. The network is speech times a random [560, V] matrix. It
// writes tokens.txt too and returns the model file's path.
func WriteParaformer(dir string, o SenseVoiceOptions) (string, error) {
	if o.Vocab == 0 {
		o.Vocab = 64
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0xa7a))
	w := make([]float32, SenseVoiceFeatures*o.Vocab)
	for i := range w {
		w[i] = float32(rng.NormFloat64()) * 0.05
	}
	g := Graph{
		Name: "paraformer-shaped",
		Nodes: []Node{
			{Op: "MatMul", Inputs: []string{"speech", "weight"}, Output: []string{"logits"}},
			{Op: "Identity", Inputs: []string{"speech_lengths"}, Output: []string{"token_num"}},
		},
		Initializers: []Tensor{{Name: "weight", DataType: Float, Dims: []int64{SenseVoiceFeatures, int64(o.Vocab)}, Raw: Floats(w)}},
		Inputs: []Value{
			{Name: "speech", ElemType: Float, Dims: []any{"N", "T", SenseVoiceFeatures}},
			{Name: "speech_lengths", ElemType: Int32, Dims: []any{"N"}},
		},
		Outputs: []Value{{Name: "logits", ElemType: Float, Dims: []any{"N", "T", o.Vocab}}, {Name: "token_num", ElemType: Int32, Dims: []any{"N"}}},
	}
	meta := slices.DeleteFunc(senseVoiceMetadata(o.Vocab, o.Drop), func(kv [2]string) bool {
		return strings.HasPrefix(kv[0], "lang_") || strings.Contains(kv[0], "itn") || kv[0] == "normalize_samples"
	})
	meta[0] = [2]string{"model_type", "paraformer"}
	path := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(path, Model{IRVersion: 8, Opset: 13, Graph: g, Metadata: meta}.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("onnxtest: write model: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens.txt"), []byte(Tokens(o.Vocab)), 0o644); err != nil {
		return "", fmt.Errorf("onnxtest: write tokens: %w", err)
	}
	return path, nil
}
