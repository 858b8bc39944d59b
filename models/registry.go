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
	"github.com/wsched/wsched/internal/config"
)

// Origin says where a model was registered.
type Origin string

// Origins.
const (
	FromConfig    Origin = "config"     // a [[models.model]] entry
	FromModelsDir Origin = "models_dir" // a ggml-NAME.bin file in models_dir
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
	// Problem says why the model cannot be served (its file is missing, or
	// is not a ggml file); "" when it can.
	Problem string `json:"problem,omitempty"`
	// Shadows is the models_dir file of the same name that this configured
	// entry hides.
	Shadows string `json:"shadows,omitempty"`
	// MemoryBytes is the configured lease size ([[models.model]] memory);
	// 0: estimate it.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// Entry is the [[models.model]] entry (zero for models_dir files): the
	// VAD settings and, for backend exec, how to run the app.
	Entry config.Model `json:"-"`
}

// Available reports whether the model's file is there and readable.
func (m Model) Available() bool { return m.Problem == "" }

// Registry is the set of models wsched can serve, as read at one moment.
type Registry struct {
	dir      string
	models   []Model  // sorted by name
	partials []string // names with a ggml-NAME.bin.partial in dir
}

// Load builds the registry from the [models] section: the configured
// entries, then a scan of models_dir for ggml-NAME.bin files (backend
// whisper.cpp). A configured entry wins over a file of the same name. A
// missing or unreadable model file is recorded in the model's Problem, not
// returned as an error; a models_dir that does not exist yet is empty. The
// error is for a models_dir that exists but cannot be listed, or ctx.
func Load(ctx context.Context, b config.Models) (*Registry, error) {
	r := &Registry{dir: b.Dir}
	byName := map[string]int{}
	for _, e := range b.Entries {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("load models: %w", err)
		}
		m := Model{Name: e.Name, Backend: e.Backend, Path: e.Path, Origin: FromConfig, MemoryBytes: int64(e.Memory), Entry: e}
		if e.Backend == config.ExecBackend {
			m.Path = e.Dir // an app: its directory stands for the model
			m = inspectApp(m)
		} else {
			m = inspect(m)
		}
		byName[m.Name] = len(r.models)
		r.models = append(r.models, m)
	}
	files, partials, err := scanDir(b.Dir)
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
		r.models = append(r.models, inspect(Model{Name: f.name, Backend: WhisperCpp, Path: f.path, Origin: FromModelsDir}))
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

type dirFile struct {
	name, path string
	test       bool // whisper.cpp's weightless for-tests-ggml-NAME.bin
}

// TestFilePrefix starts the names of whisper.cpp's weightless test models
// (for-tests-ggml-NAME.bin: real headers and vocabularies, no weights). A
// models_dir of them lists each as NAME, unless ggml-NAME.bin is there too.
const TestFilePrefix = "for-tests-"

// scanDir lists the ggml-NAME.bin and for-tests-ggml-NAME.bin files (or
// links to files) in dir, and the names of unfinished downloads.
func scanDir(dir string) (files []dirFile, partials []string, err error) {
	if dir == "" {
		return nil, nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("scan models_dir: %w", err)
	}
	real := map[string]bool{}
	for _, e := range entries {
		base, test := strings.CutPrefix(e.Name(), TestFilePrefix)
		name, ok := strings.CutPrefix(base, "ggml-")
		if !ok || e.IsDir() {
			continue
		}
		if n, ok := strings.CutSuffix(name, ".bin"+PartialSuffix); ok && n != "" && !test {
			partials = append(partials, n)
			continue
		}
		if name, ok = strings.CutSuffix(name, ".bin"); ok && name != "" {
			files = append(files, dirFile{name: name, path: filepath.Join(dir, e.Name()), test: test})
			real[name] = real[name] || !test
		}
	}
	kept := files[:0]
	for _, f := range files {
		if !f.test || !real[f.name] {
			kept = append(kept, f)
		}
	}
	return kept, partials, nil
}

// inspect fills the size, and for whisper.cpp the header, or the problem.
func inspect(m Model) Model {
	st, err := os.Stat(m.Path)
	if err != nil {
		m.Problem = describeStatErr(err)
		return m
	}
	if !st.IsDir() {
		m.SizeBytes = st.Size()
	} else if m.SizeBytes, err = dirSize(m.Path); err != nil {
		m.Problem = err.Error()
		return m
	}
	if m.Backend != WhisperCpp {
		return m
	}
	if st.IsDir() {
		m.Problem = "is a directory; whisper.cpp loads a ggml-*.bin file"
		return m
	}
	h, err := ggml.ReadFile(m.Path)
	switch {
	case errors.Is(err, ggml.ErrBadMagic):
		m.Problem = "not a whisper.cpp ggml model file (bad magic)"
	case err != nil:
		m.Problem = "unreadable ggml header: " + strings.TrimPrefix(err.Error(), m.Path+": ")
	default:
		m.Header = h
	}
	return m
}

// inspectApp checks an exec entry's directory; the app's size is not the
// model's, so none is given.
func inspectApp(m Model) Model {
	st, err := os.Stat(m.Path)
	switch {
	case err != nil:
		m.Problem = "app directory: " + describeStatErr(err)
	case !st.IsDir():
		m.Problem = "app directory: not a directory"
	}
	return m
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
