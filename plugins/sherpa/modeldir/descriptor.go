package modeldir

import (
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/plugins/descriptor"
)

// Name is the backend name of sherpa-onnx model directories: the engine's
// name, declared once, by the estimator profile that sizes it.
const Name = string(estimator.SherpaOnnx)

// MaxStreams is how many jobs of one model an instance decodes at once by
// default, their pieces batched into one ONNX Runtime run
// (docs/sherpa-backend.md, "Streams").
const MaxStreams = 4

// Descriptor is what the sherpa-onnx backend tells the daemon (without the
// devices: Info says whether a CUDA provider library is there). Its
// layouts are the directories OpenDir accepts.
func Descriptor() descriptor.Descriptor {
	tokens := []string{"tokens.txt", "*tokens.txt"}
	return descriptor.Descriptor{
		Name:    Name,
		Formats: []string{descriptor.FormatONNX},
		Layouts: []descriptor.Layout{
			{Kind: descriptor.LayoutDir, Requires: [][]string{tokens, {"model.onnx", "model.int8.onnx"}}},
			{Kind: descriptor.LayoutDir, Requires: [][]string{tokens,
				{"encoder.onnx", "*encoder.onnx", "encoder.int8.onnx", "*encoder.int8.onnx"},
				{"decoder.onnx", "*decoder.onnx", "decoder.int8.onnx", "*decoder.int8.onnx"}}},
		},
		// The estimator's sherpa-onnx profile reads the ONNX initializers.
		Profile:    Name,
		MaxStreams: MaxStreams,
		VAD:        true,
		Options: []descriptor.Option{
			{Name: "language", Type: descriptor.TypeEnum, Values: []string{"auto", "zh", "en", "ja", "ko", "yue"}, Job: true,
				Help: "SenseVoice's language, fixed when it loads (default auto); a job naming a language gets an instance of its own"},
			{Name: "itn", Type: descriptor.TypeBool, Help: "inverse text normalization (default on)"},
			{Name: "threads", Type: descriptor.TypeInt, Help: "CPU threads of the recognizer (default: the backend's)"},
		},
	}
}
