// Package describe holds the whisper.cpp backend's descriptor: pure Go, no
// build tag, so the CLI and tests read it without linking libwhisper.
package describe

import (
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/plugins/descriptor"
)

// Name is the backend name of whisper.cpp models: the engine's name,
// declared once, by the estimator profile that sizes it. Models are ggml-NAME.bin files (and whisper.cpp's weightless
// for-tests-ggml-NAME.bin) in models_dir, or [[models.model]] entries.
const Name = string(estimator.WhisperCpp)

// MaxStreams is how many jobs of one model an instance decodes at once by
// default, each on a whisper_state of its own over the shared weights
// (docs/whisper-backend.md, "Streams" says why 4).
const MaxStreams = 4

// Descriptor is what the whisper.cpp backend tells the daemon (without the
// devices, which Info fills in from the build).
func Descriptor() descriptor.Descriptor {
	return descriptor.Descriptor{
		Name:    Name,
		Formats: []string{descriptor.FormatGGML},
		Layouts: []descriptor.Layout{
			{Kind: descriptor.LayoutFile, Prefix: "ggml-", Suffix: ".bin"},
			{Kind: descriptor.LayoutFile, Prefix: "for-tests-ggml-", Suffix: ".bin", Weak: true},
		},
		// The estimator's whisper.cpp profile reads the ggml header.
		Profile: Name,
		// whisper.cpp's default best_of with temperature fallback, which
		// this backend keeps: a fallback re-allocates the KV self cache
		// for best_of + 2 decoders, so leases reserve for it.
		BestOf:     5,
		MaxStreams: MaxStreams,
		VAD:        true,
		Options: []descriptor.Option{{
			Name: "flash_attention", Type: descriptor.TypeBool, Default: "true",
			Help: "use flash attention (whisper.cpp's default; shrinks the encoder's compute buffer)",
		}, {
			Name: "threads", Type: descriptor.TypeInt, Help: "CPU threads per transcription (default: the backend's)",
		}},
	}
}
