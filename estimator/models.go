package estimator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wsched/wsched/estimator/ggml"
)

// KnownModel is a Whisper checkpoint described by its hyper-parameters, so an
// estimate works without the file. FType is left at f16; callers set it.
type KnownModel struct {
	Name    string       `json:"name"`
	HParams ggml.HParams `json:"hparams"`
}

// knownModels: dims of OpenAI's checkpoints (whisper/__init__.py _MODELS,
// ModelDimensions), as whisper.cpp's converter writes them. .en models have
// one token fewer; large-v3 and turbo have 128 mel bands and one language
// more; turbo keeps large-v3's encoder and 4 decoder layers.
var knownModels = []KnownModel{
	{"tiny", dims(51865, 384, 6, 4, 4, 80)},
	{"tiny.en", dims(51864, 384, 6, 4, 4, 80)},
	{"base", dims(51865, 512, 8, 6, 6, 80)},
	{"base.en", dims(51864, 512, 8, 6, 6, 80)},
	{"small", dims(51865, 768, 12, 12, 12, 80)},
	{"small.en", dims(51864, 768, 12, 12, 12, 80)},
	{"medium", dims(51865, 1024, 16, 24, 24, 80)},
	{"medium.en", dims(51864, 1024, 16, 24, 24, 80)},
	{"large-v1", dims(51865, 1280, 20, 32, 32, 80)},
	{"large-v2", dims(51865, 1280, 20, 32, 32, 80)},
	{"large-v3", dims(51866, 1280, 20, 32, 32, 128)},
	{"large-v3-turbo", dims(51866, 1280, 20, 32, 4, 128)},
}

// aliases follow openai-whisper's names: "large" is large-v3 and "turbo"
// large-v3-turbo.
var aliases = map[string]string{"large": "large-v3", "turbo": "large-v3-turbo", "large-turbo": "large-v3-turbo"}

func dims(vocab, state, head, audioLayers, textLayers, mels int32) ggml.HParams {
	return ggml.HParams{NVocab: vocab, NAudioCtx: 1500, NAudioState: state, NAudioHead: head,
		NAudioLayer: audioLayers, NTextCtx: 448, NTextState: state, NTextHead: head,
		NTextLayer: textLayers, NMels: mels, FType: 1}
}

// KnownModels returns the table (copies).
func KnownModels() []KnownModel { return slices.Clone(knownModels) }

// LookupModel finds a known model by name or alias, case-insensitively; a
// "ggml-" prefix and ".bin" suffix (whisper.cpp file names) are ignored.
func LookupModel(name string) (KnownModel, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	n = strings.TrimSuffix(strings.TrimPrefix(n, "ggml-"), ".bin")
	if a, ok := aliases[n]; ok {
		n = a
	}
	for _, m := range knownModels {
		if m.Name == n {
			return m, true
		}
	}
	return KnownModel{}, false
}

// resolvedModel is what a profile works from: a name, hparams, and for a
// parsed file its tensors.
type resolvedModel struct {
	name   string
	hp     ggml.HParams
	header *ggml.Model
}

func resolveModel(req Request) (resolvedModel, error) {
	if h := req.Header; h != nil {
		name := req.Model
		if name == "" {
			name = h.Family()
		}
		return resolvedModel{name: name, hp: h.HParams, header: h}, nil
	}
	m, ok := LookupModel(req.Model)
	if !ok {
		return resolvedModel{}, fmt.Errorf("estimate: model %q (known: %s): %w", req.Model, knownNames(), ErrUnknownModel)
	}
	return resolvedModel{name: m.Name, hp: m.HParams}, nil
}

func knownNames() string {
	names := make([]string, 0, len(knownModels))
	for _, m := range knownModels {
		names = append(names, m.Name)
	}
	return strings.Join(names, ", ")
}

// params is the parameter count of the model.
func (m resolvedModel) params() int64 { return m.hp.Params() }
