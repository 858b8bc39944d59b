package models

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/wsched/wsched/estimator/ggml"
	"github.com/wsched/wsched/estimator/onnx"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/plugins/descriptor"
)

// Origin says where a model was registered.
type Origin string

// Origins.
const (
	FromConfig    Origin = "config"     // a [[models.model]] entry
	FromModelsDir Origin = "models_dir" // a file or directory in models_dir that a backend's layout names
)

// Model is one servable model.
type Model struct {
	Name    string `json:"name"`
	Backend string `json:"backend"`
	Path    string `json:"path"`
	// SizeBytes is the file's size (a directory's: the sum of its files);
	// 0 when the path is missing.
	SizeBytes int64  `json:"size_bytes"`
	Origin    Origin `json:"origin"`
	// Header is the parsed header of a whisper.cpp ggml file; nil for other
	// backends and when the file cannot be read.
	Header *ggml.Model `json:"-"`
	// ONNX are the read ONNX files of a sherpa-onnx model directory; nil
	// for other backends and when the directory cannot be read.
	ONNX []*onnx.Model `json:"-"`
	// Problem says why the model cannot be served (its file is missing, or
	// is not a ggml file); "" when it can.
	Problem string `json:"problem,omitempty"`
	// Shadows is the models_dir file of the same name that this configured
	// entry hides.
	Shadows string `json:"shadows,omitempty"`
	// MemoryBytes is the configured lease size ([[models.model]] memory);
	// 0: estimate it.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// MaxStreams is [[models.model]] max_streams: how many of its jobs one
	// instance serves at once (0: the backend's default; see Streams).
	MaxStreams int `json:"max_streams,omitempty"`
	// StreamMemoryBytes is [[models.model]] stream_memory: what each
	// further stream adds to an instance's lease (0: the estimate).
	StreamMemoryBytes int64 `json:"stream_memory_bytes,omitempty"`
	// Entry is the [[models.model]] entry (zero for models_dir files): the
	// VAD settings.
	Entry config.Model `json:"-"`
	// Descriptor is its backend's (zero when no backend of that name was
	// discovered: Problem says so).
	Descriptor descriptor.Descriptor `json:"-"`
	// Options are the entry's checked options as they go to the backend
	// (defaults not filled in).
	Options map[string]string `json:"options,omitempty"`
}

// Streams is how many jobs of the model one backend instance serves at
// once: the entry's max_streams, else its backend's default (the
// descriptor's max_streams), at least 1.
func (m Model) Streams() int {
	if m.MaxStreams > 0 {
		return m.MaxStreams
	}
	return m.Descriptor.Streams()
}

// Available reports whether the model's file is there and readable.
func (m Model) Available() bool { return m.Problem == "" }

// Registry is the set of models wsched can serve, as read at one moment.
type Registry struct {
	dir      string
	models   []Model  // sorted by name
	partials []string // names with a ggml-NAME.bin.partial in dir
}

// Load builds the registry from the [models] section and the backends'
// descriptors: the configured entries, then a scan of models_dir for the
// files and directories the backends' layouts name (ggml-NAME.bin for
// whisper.cpp, say). A configured entry wins over a file of the same name.
// An entry whose backend is not in backends, whose options its descriptor
// refuses, or whose model is missing or unreadable is recorded in the
// model's Problem, not returned as an error; a models_dir that does not
// exist yet is empty. The error is for a models_dir that exists but cannot
// be listed, or ctx.
func Load(ctx context.Context, b config.Models, backends descriptor.Set) (*Registry, error) {
	r := &Registry{dir: b.Dir}
	byName := map[string]int{}
	for i, e := range b.Entries {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("load models: %w", err)
		}
		m := fromEntry(e, fmt.Sprintf("models.model#%d", i), backends)
		byName[m.Name] = len(r.models)
		r.models = append(r.models, m)
	}
	files, partials, err := scanDir(b.Dir, backends)
	if err != nil {
		return nil, err
	}
	r.partials = partials
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("load models: %w", err)
		}
		if i, ok := byName[f.name]; ok {
			r.models[i].Shadows = f.path
			continue
		}
		r.models = append(r.models, inspect(Model{Name: f.name, Backend: f.desc.Name, Path: f.path, Origin: FromModelsDir, Descriptor: f.desc}))
	}
	sort.Slice(r.models, func(i, j int) bool { return r.models[i].Name < r.models[j].Name })
	return r, nil
}

// Dir is the models_dir the registry scanned.
func (r *Registry) Dir() string { return r.dir }

// Models returns the models sorted by name.
func (r *Registry) Models() []Model { return append([]Model(nil), r.models...) }

// Partials names the models whose download is unfinished in models_dir
// (ggml-NAME.bin.partial); the next Pull of each resumes it.
func (r *Registry) Partials() []string { return append([]string(nil), r.partials...) }

// Names lists the model names, comma-separated ("none" when empty).
func (r *Registry) Names() string {
	if len(r.models) == 0 {
		return "none"
	}
	names := make([]string, len(r.models))
	for i, m := range r.models {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}

// Lookup returns the model called name. It fails with ErrUnknownModel
// (naming the known models) when there is none, and with ErrUnavailable
// (and the model) when its file is missing or unreadable.
func (r *Registry) Lookup(name string) (Model, error) {
	for _, m := range r.models {
		if m.Name != name {
			continue
		}
		if !m.Available() {
			return m, fmt.Errorf("model %q: %s: %w", name, m.Problem, ErrUnavailable)
		}
		return m, nil
	}
	return Model{}, fmt.Errorf("model %q (known: %s): %w", name, r.Names(), ErrUnknownModel)
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func describeStatErr(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "file missing"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", dir, err)
	}
	return total, nil
}
