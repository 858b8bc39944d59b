package models

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wsched/wsched/estimator/ggml"
	"github.com/wsched/wsched/estimator/onnx"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/plugins/descriptor"
)

// fromEntry is the model of a [[models.model]] entry: its backend's
// descriptor, its checked options, what it loads, inspected.
func fromEntry(e config.Model, key string, backends descriptor.Set) Model {
	m := Model{Name: e.Name, Backend: e.Backend, Path: e.Path, Origin: FromConfig, MemoryBytes: int64(e.Memory), MaxStreams: e.MaxStreams, StreamMemoryBytes: int64(e.StreamMemory), Entry: e}
	d, err := backends.Lookup(e.Backend)
	if err != nil {
		m.Problem = err.Error()
		return m
	}
	m.Descriptor = d
	var settings map[string]any
	m.Path, settings = modelPath(e, d)
	if m.Options, err = d.Check(key, settings); err != nil {
		m.Problem = err.Error()
		return m
	}
	if d.Reads(descriptor.FormatApp) {
		return inspectApp(m)
	}
	return inspect(m)
}

// modelPath is what an entry's model loads from (its path, or the option
// the descriptor's PathKey names, the entry's path then being an option
// too) and the options left.
func modelPath(e config.Model, d descriptor.Descriptor) (string, map[string]any) {
	settings := e.Settings()
	if d.PathKey == "" || d.PathKey == "path" {
		return e.Path, settings
	}
	path, _ := settings[d.PathKey].(string)
	delete(settings, d.PathKey)
	if e.Path != "" {
		settings["path"] = e.Path
	}
	return path, settings
}

// dirFile is a model found in models_dir.
type dirFile struct {
	name, path string
	desc       descriptor.Descriptor
	weak       bool // a stand-in another layout's file of the same name hides
}

// scanDir lists the models the backends' layouts find in dir, and the
// names of unfinished downloads (a file layout's name + PartialSuffix).
func scanDir(dir string, backends descriptor.Set) (files []dirFile, partials []string, err error) {
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
	all := backends.All()
	real := map[string]bool{}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		f, partial, ok := match(path, e.Name(), all)
		switch {
		case partial:
			partials = append(partials, f.name)
		case ok:
			files = append(files, f)
			real[f.name] = real[f.name] || !f.weak
		}
	}
	kept := files[:0]
	for _, f := range files {
		if !f.weak || !real[f.name] {
			kept = append(kept, f)
		}
	}
	return kept, partials, nil
}

// match finds the first layout of the backends that names the file or
// directory at path; partial reports an unfinished download instead.
func match(path, file string, all []descriptor.Descriptor) (f dirFile, partial, ok bool) {
	var names []string
	dir := isDir(path)
	if dir {
		names = listFiles(path)
	}
	for _, d := range all {
		for _, l := range d.Layouts {
			switch {
			case dir && l.Kind == descriptor.LayoutDir:
				if _, ok := l.Files(names); ok {
					return dirFile{name: file, path: path, desc: d}, false, true
				}
			case !dir && l.Kind == descriptor.LayoutFile:
				if base, cut := strings.CutSuffix(file, PartialSuffix); cut && !l.Weak {
					if name, ok := l.Match(base); ok {
						return dirFile{name: name}, true, false
					}
					continue
				}
				if name, ok := l.Match(file); ok {
					return dirFile{name: name, path: path, desc: d, weak: l.Weak}, false, true
				}
			}
		}
	}
	return dirFile{}, false, false
}

// listFiles lists a directory's regular files (and links), sorted.
func listFiles(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0 {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// Inspect is the model called name at path as backend d serves it: its
// size and what is read for sizing (a ggml header, ONNX initializers), or
// its Problem. `wsched estimate` reads a model directory with it.
func Inspect(name, path string, d descriptor.Descriptor) Model {
	return inspect(Model{Name: name, Backend: d.Name, Path: path, Descriptor: d})
}

// inspect fills the size, and what the daemon reads of the formats the
// backend loads (a ggml header, ONNX initializers), or the problem.
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
	d := m.Descriptor
	switch {
	case d.Reads(descriptor.FormatONNX):
		return inspectONNX(m, st.IsDir())
	case d.Reads(descriptor.FormatGGML) && st.IsDir():
		m.Problem = fmt.Sprintf("is a directory; %s loads a ggml file", d.Name)
	case d.Reads(descriptor.FormatGGML):
		return inspectGGML(m)
	}
	return m
}

func inspectGGML(m Model) Model {
	h, err := ggml.ReadFile(m.Path)
	switch {
	case errors.Is(err, ggml.ErrBadMagic):
		m.Problem = fmt.Sprintf("not a %s ggml model file (bad magic)", m.Descriptor.Name)
	case err != nil:
		m.Problem = "unreadable ggml header: " + strings.TrimPrefix(err.Error(), m.Path+": ")
	default:
		m.Header = h
	}
	return m
}

// inspectONNX reads the ONNX files a directory layout of the backend picks
// in the model's directory (the directory of a file path).
func inspectONNX(m Model, isDir bool) Model {
	dir := m.Path
	if !isDir {
		dir = filepath.Dir(m.Path)
	}
	names := listFiles(dir)
	for _, l := range m.Descriptor.Layouts {
		files, ok := l.Files(names)
		if !ok {
			continue
		}
		for _, f := range files {
			if !strings.HasSuffix(f, ".onnx") {
				continue
			}
			o, err := onnx.ReadFile(filepath.Join(dir, f))
			if err != nil {
				m.Problem, m.ONNX = err.Error(), nil
				return m
			}
			m.ONNX = append(m.ONNX, o)
		}
		return m
	}
	m.Problem = fmt.Sprintf("%s holds none of the layouts backend %s loads", dir, m.Descriptor.Name)
	return m
}

// inspectApp checks the directory of an app a backend runs; the app's size
// is not the model's, so none is given.
func inspectApp(m Model) Model {
	st, err := os.Stat(m.Path)
	switch {
	case m.Path == "":
		m.Problem = "app directory: not set"
	case err != nil:
		m.Problem = "app directory: " + describeStatErr(err)
	case !st.IsDir():
		m.Problem = "app directory: not a directory"
	}
	return m
}
