// Package descriptor is what a backend says about itself, and the daemon's
// lookup of it: the backend name models are configured with, how its models
// are found on disk (file names, directory layouts), the estimator profile
// that sizes them, the options a [[models.model]] entry may set (typed,
// with defaults and help, validated with errors that name the key) and the
// devices this build of the backend can really use. A backend returns its
// Descriptor in plugins.Info; the daemon collects them from the binaries in
// its plugin directories (plugins/host) and looks them up by name, so no
// daemon package knows a backend by name. Pure Go, standard library only
// (and confval for the errors), so any backend can import it.
package descriptor

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
)

// Device kinds a backend can use.
const (
	DeviceCPU  = "cpu"
	DeviceCUDA = "cuda"
)

// Model formats the daemon can read for sizing. A backend may name other
// formats; the daemon then reads nothing from its models (an entry's
// memory, or the profile's table by name, sizes them).
const (
	FormatGGML = "ggml" // a whisper.cpp ggml file: the header is read
	FormatONNX = "onnx" // ONNX files: their initializers are read
	FormatApp  = "app"  // an application directory, not a model file
)

// Descriptor is one backend's self-description.
type Descriptor struct {
	// Name is the backend name a [[models.model]] entry's backend names
	// ("whisper.cpp"); models found through Layouts get it.
	Name string `json:"name"`
	// Plugin is NAME in the binary's file name wsched-backend-NAME. The
	// host fills it in from the file it discovered; a backend leaves it "".
	Plugin string `json:"plugin,omitempty"`
	// Formats are the model formats it loads (FormatGGML, FormatONNX, …).
	Formats []string `json:"formats,omitempty"`
	// Layouts say how its models are found in models_dir, tried in order.
	// None: models come only from [[models.model]] entries.
	Layouts []Layout `json:"layouts,omitempty"`
	// Profile is the estimator profile that sizes its models
	// ("whisper.cpp", "sherpa-onnx"); "": an entry must set memory.
	Profile string `json:"profile,omitempty"`
	// Memory sizes the models of a backend without a Profile: a lease of
	// BaseBytes plus PerModelByte × the model's size on disk. nil (and no
	// profile): an entry must set memory.
	Memory *MemoryRule `json:"memory,omitempty"`
	// BestOf is how many decoders a lease reserves for (whisper.cpp's
	// temperature fallback re-allocates the KV cache for best_of + 2); 0:
	// the profile's default.
	BestOf int `json:"best_of,omitempty"`
	// MaxStreams is how many jobs of one model an instance of this backend
	// decodes at once, sharing the loaded weights (issue 26): each stream
	// adds its own decoding state, and the instance's lease grows by one
	// stream's estimate while it runs. 0 or 1: one job at a time. A
	// [[models.model]] entry's max_streams overrides it.
	MaxStreams int `json:"max_streams,omitempty"`
	// Options are the keys a [[models.model]] entry may set for it, in its
	// options table (or as a top-level key of the entry of the same name).
	Options []Option `json:"options,omitempty"`
	// Devices are the device kinds this build can really use (DeviceCPU,
	// DeviceCUDA). A backend without DeviceCUDA is placed on the CPU: its
	// instances lease no GPU memory.
	Devices []string `json:"devices,omitempty"`
	// VAD says whether it can skip non-speech with a VAD model.
	VAD bool `json:"vad,omitempty"`
	// PathKey is the entry key naming what it loads: "" or "path" for a
	// model file or directory, "dir" for an application directory (the
	// entry's path is then an option).
	PathKey string `json:"path_key,omitempty"`
}

// MemoryRule sizes a model from its size on disk.
type MemoryRule struct {
	BaseBytes    int64   `json:"base_bytes"`
	PerModelByte float64 `json:"per_model_byte"`
}

// Bytes is the lease for a model of size bytes on disk.
func (r MemoryRule) Bytes(size int64) int64 {
	return r.BaseBytes + int64(math.Ceil(r.PerModelByte*float64(size)))
}

// Sized reports whether d's models are sized without an entry's memory.
func (d Descriptor) Sized() bool { return d.Profile != "" || d.Memory != nil }

// IsZero reports whether d says nothing (an old backend sends none).
func (d Descriptor) IsZero() bool { return d.Name == "" }

// Streams is how many concurrent streams an instance serves by default
// (MaxStreams, at least 1).
func (d Descriptor) Streams() int { return max(d.MaxStreams, 1) }

// CPUOnly reports whether the backend cannot use a GPU in this build.
func (d Descriptor) CPUOnly() bool {
	return len(d.Devices) > 0 && !slices.Contains(d.Devices, DeviceCUDA)
}

// Reads reports whether the daemon reads format from its models.
func (d Descriptor) Reads(format string) bool { return slices.Contains(d.Formats, format) }

// Option returns the option called name.
func (d Descriptor) Option(name string) (Option, bool) {
	for _, o := range d.Options {
		if o.Name == name {
			return o, true
		}
	}
	return Option{}, false
}

// LayoutKind is what a layout matches in models_dir.
type LayoutKind string

// Layout kinds.
const (
	LayoutFile LayoutKind = "file" // one file: Prefix + NAME + Suffix
	LayoutDir  LayoutKind = "dir"  // a directory NAME holding Requires
)

// Layout is one way a backend's models appear in models_dir.
type Layout struct {
	Kind LayoutKind `json:"kind"`
	// Prefix and Suffix frame the model name in a file's name
	// (LayoutFile: "ggml-" NAME ".bin").
	Prefix string `json:"prefix,omitempty"`
	Suffix string `json:"suffix,omitempty"`
	// Weak marks files that only stand in for a model (weightless test
	// files): another layout's file of the same name hides them.
	Weak bool `json:"weak,omitempty"`
	// Requires are the files a LayoutDir directory must hold: one of each
	// entry's glob patterns, tried in order (["model.onnx",
	// "model.int8.onnx"]). The first match of each entry is what the
	// backend loads; the files of a format the daemon reads are read.
	Requires [][]string `json:"requires,omitempty"`
}

// Match returns the model name a models_dir file called file would have
// under a LayoutFile l.
func (l Layout) Match(file string) (string, bool) {
	if l.Kind != LayoutFile {
		return "", false
	}
	name, ok := strings.CutPrefix(file, l.Prefix)
	if !ok {
		return "", false
	}
	name, ok = strings.CutSuffix(name, l.Suffix)
	if !ok || name == "" {
		return "", false
	}
	return name, true
}

// Files returns the files a LayoutDir l picks from names (a directory's
// regular files, sorted), one per entry of Requires, or false when one is
// missing. A LayoutDir without Requires matches nothing.
func (l Layout) Files(names []string) ([]string, bool) {
	if l.Kind != LayoutDir || len(l.Requires) == 0 {
		return nil, false
	}
	var out []string
	for _, alts := range l.Requires {
		f := pick(names, alts)
		if f == "" {
			return nil, false
		}
		out = append(out, f)
	}
	return out, true
}

func pick(names, patterns []string) string {
	for _, p := range patterns {
		for _, n := range names {
			if ok, _ := filepath.Match(p, n); ok {
				return n
			}
		}
	}
	return ""
}
