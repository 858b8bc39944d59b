package onnxtest

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// Whisper token ids of the generated model (an English-only, 64-token
// Whisper).
const (
	whisperVocab = 64
	whisperSOT   = 1
	whisperEOT   = 2
)

// WriteWhisper writes into dir an English-only Whisper pair with the
// interface sherpa-onnx v1.12.0 expects (offline-whisper-model.cc,
// offline-whisper-greedy-search-decoder.cc): tiny-encoder.onnx (mel →
// n_layer_cross_k, n_layer_cross_v), tiny-decoder.onnx (tokens,
// in_n_layer_self_k_cache, in_n_layer_self_v_cache, n_layer_cross_k,
// n_layer_cross_v, offset → logits, out_n_layer_self_k_cache,
// out_n_layer_self_v_cache), every metadata key sherpa-onnx reads, and
// tiny-tokens.txt (base64 symbols, as Whisper's are). The decoder's logits
// are token × a random row + a random bias, with end-of-text never chosen,
// so greedy search runs to its token limit.
func WriteWhisper(dir string, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x3a1))
	row, bias := make([]float32, whisperVocab), make([]float32, whisperVocab)
	for i := range row {
		row[i], bias[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	row[whisperEOT], bias[whisperEOT] = 0, -1e4
	const layers, ctx, state = 1, 64, 8
	cross := Tensor{Name: "cross", DataType: Float, Dims: []int64{layers, 1, 4, state}, Raw: Floats(make([]float32, 4*state))}
	enc := Graph{
		Name: "whisper-encoder-shaped",
		Nodes: []Node{
			{Op: "Identity", Inputs: []string{"cross"}, Output: []string{"n_layer_cross_k"}},
			{Op: "Identity", Inputs: []string{"cross"}, Output: []string{"n_layer_cross_v"}},
		},
		Initializers: []Tensor{cross},
		Inputs:       []Value{{Name: "mel", ElemType: Float, Dims: []any{"N", 80, "T"}}},
		Outputs: []Value{
			{Name: "n_layer_cross_k", ElemType: Float, Dims: []any{layers, "N", 4, state}},
			{Name: "n_layer_cross_v", ElemType: Float, Dims: []any{layers, "N", 4, state}},
		},
	}
	cache := []any{layers, "N", ctx, state}
	dec := Graph{
		Name: "whisper-decoder-shaped",
		Nodes: []Node{
			{Op: "Cast", Inputs: []string{"tokens"}, Output: []string{"tokens_f"}, Ints: map[string]int64{"to": Float}},
			{Op: "Unsqueeze", Inputs: []string{"tokens_f", "axis2"}, Output: []string{"tokens_col"}},
			{Op: "Mul", Inputs: []string{"tokens_col", "row"}, Output: []string{"scaled"}},
			{Op: "Add", Inputs: []string{"scaled", "bias"}, Output: []string{"logits"}},
			{Op: "Identity", Inputs: []string{"in_n_layer_self_k_cache"}, Output: []string{"out_n_layer_self_k_cache"}},
			{Op: "Identity", Inputs: []string{"in_n_layer_self_v_cache"}, Output: []string{"out_n_layer_self_v_cache"}},
		},
		Initializers: []Tensor{
			{Name: "axis2", DataType: Int64, Dims: []int64{1}, Raw: Int64s(2)},
			{Name: "row", DataType: Float, Dims: []int64{whisperVocab}, Raw: Floats(row)},
			{Name: "bias", DataType: Float, Dims: []int64{whisperVocab}, Raw: Floats(bias)},
		},
		Inputs: []Value{
			{Name: "tokens", ElemType: Int64, Dims: []any{"N", "n"}},
			{Name: "in_n_layer_self_k_cache", ElemType: Float, Dims: cache},
			{Name: "in_n_layer_self_v_cache", ElemType: Float, Dims: cache},
			{Name: "n_layer_cross_k", ElemType: Float, Dims: []any{layers, "N", 4, state}},
			{Name: "n_layer_cross_v", ElemType: Float, Dims: []any{layers, "N", 4, state}},
			{Name: "offset", ElemType: Int64, Dims: []any{1}},
		},
		Outputs: []Value{
			{Name: "logits", ElemType: Float, Dims: []any{"N", "n", whisperVocab}},
			{Name: "out_n_layer_self_k_cache", ElemType: Float, Dims: cache},
			{Name: "out_n_layer_self_v_cache", ElemType: Float, Dims: cache},
		},
	}
	meta := [][2]string{
		{"model_type", "whisper-tiny.en"}, {"n_mels", "80"}, {"n_text_layer", fmt.Sprint(layers)}, {"n_text_ctx", fmt.Sprint(ctx)},
		{"n_text_state", fmt.Sprint(state)}, {"n_vocab", fmt.Sprint(whisperVocab)}, {"sot", fmt.Sprint(whisperSOT)}, {"eot", fmt.Sprint(whisperEOT)},
		{"blank_id", "3"}, {"translate", "4"}, {"transcribe", "5"}, {"is_multilingual", "0"}, {"no_timestamps", "6"},
		{"no_speech", "7"}, {"sot_sequence", fmt.Sprint(whisperSOT)},
	}
	files := map[string][]byte{
		"tiny-encoder.onnx": Model{IRVersion: 8, Opset: 13, Graph: enc, Metadata: meta}.Bytes(),
		"tiny-decoder.onnx": Model{IRVersion: 8, Opset: 13, Graph: dec}.Bytes(),
		"tiny-tokens.txt":   []byte(whisperTokens()),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("onnxtest: write %s: %w", name, err)
		}
	}
	return nil
}

// whisperTokens is a tokens.txt with base64-encoded symbols.
func whisperTokens() string {
	special := []string{"!", "<|startoftranscript|>", "<|endoftext|>", "<|blank|>", "<|translate|>", "<|transcribe|>", "<|notimestamps|>", "<|nospeech|>"}
	var b strings.Builder
	for i := range whisperVocab {
		sym := fmt.Sprintf(" w%d", i)
		if i < len(special) {
			sym = special[i]
		}
		fmt.Fprintf(&b, "%s %d\n", base64.StdEncoding.EncodeToString([]byte(sym)), i)
	}
	return b.String()
}
