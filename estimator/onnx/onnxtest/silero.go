package onnxtest

import (
	"fmt"
	"math"
	"os"
)

// WriteSileroVAD writes to path a model with silero VAD v5's interface as
// sherpa-onnx v1.12.0 checks it (sherpa-onnx/csrc/silero-vad-model.cc):
// inputs input (float, [1, N]), state (float, [2, 1, 128]) and sr (int64,
// [1]); outputs output (float, [1, 1]), the speech probability, and stateN
// (the state, passed through). The network is an energy detector:
// sigmoid(4 · (ln(mean(input²) + 1e-10) − ln(1e-3))), so a window whose
// RMS is above 3 % of full scale counts as speech.
func WriteSileroVAD(path string) error {
	scalar := func(name string, v float32) Tensor {
		return Tensor{Name: name, DataType: Float, Raw: Floats([]float32{v})}
	}
	g := Graph{
		Name: "silero-vad-shaped",
		Nodes: []Node{
			{Op: "Mul", Inputs: []string{"input", "input"}, Output: []string{"power"}},
			{Op: "ReduceMean", Inputs: []string{"power"}, Output: []string{"mean"}, Ints: map[string]int64{"keepdims": 1}},
			{Op: "Add", Inputs: []string{"mean", "eps"}, Output: []string{"mean_eps"}},
			{Op: "Log", Inputs: []string{"mean_eps"}, Output: []string{"log_power"}},
			{Op: "Sub", Inputs: []string{"log_power", "floor"}, Output: []string{"above"}},
			{Op: "Mul", Inputs: []string{"above", "gain"}, Output: []string{"logit"}},
			{Op: "Sigmoid", Inputs: []string{"logit"}, Output: []string{"output"}},
			{Op: "Identity", Inputs: []string{"state"}, Output: []string{"stateN"}},
		},
		Initializers: []Tensor{scalar("eps", 1e-10), scalar("floor", float32(math.Log(1e-3))), scalar("gain", 4)},
		Inputs: []Value{
			{Name: "input", ElemType: Float, Dims: []any{1, "N"}},
			{Name: "state", ElemType: Float, Dims: []any{2, 1, 128}},
			{Name: "sr", ElemType: Int64, Dims: []any{1}},
		},
		Outputs: []Value{
			{Name: "output", ElemType: Float, Dims: []any{1, 1}},
			{Name: "stateN", ElemType: Float, Dims: []any{2, 1, 128}},
		},
	}
	m := Model{IRVersion: 8, Opset: 13, Graph: g, Metadata: [][2]string{{"model_author", "wsched onnxtest (energy detector)"}}}
	if err := os.WriteFile(path, m.Bytes(), 0o644); err != nil {
		return fmt.Errorf("onnxtest: write VAD model: %w", err)
	}
	return nil
}
