package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/models"
	"github.com/wsched/wsched/plugins/descriptor"
)

// modelDirArg accepts one argument, a model directory (`wsched estimate
// --backend sherpa-onnx DIR`); a model name goes in --model.
func modelDirArg(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if st, err := os.Stat(args[0]); len(args) > 1 || err != nil || !st.IsDir() {
		return fmt.Errorf("unknown command %q for %q: the argument is a model directory; a model name or file goes in --model", args[0], cmd.CommandPath())
	}
	return nil
}

// profileBackend finds the backend whose estimator profile (or backend
// name) is name, for profiles that size a backend's model files rather
// than model names (sherpa-onnx): `wsched estimate --backend sherpa-onnx`.
func profileBackend(name string) (descriptor.Descriptor, bool) {
	set := descriptor.NewSet(inTree()...)
	if d, err := set.Lookup(name); err == nil && d.Profile != "" {
		return d, true
	}
	return set.ByProfile(name)
}

// readModelDir fills req from the model directory (or file) at path as the
// backend sized by req's profile loads it: the ONNX files its layout picks.
func readModelDir(req *estimator.Request, path string) error {
	d, ok := profileBackend(string(req.Backend))
	if !ok || !d.Reads(descriptor.FormatONNX) {
		return fmt.Errorf("estimate: model %s is a directory, not a ggml model file (a directory is sized with --backend %s)", path, profiles())
	}
	m := models.Inspect(filepath.Base(filepath.Clean(path)), path, d)
	if m.Problem != "" {
		return fmt.Errorf("estimate: model %s: %s", path, m.Problem)
	}
	req.Model, req.ONNX = m.Name, m.ONNX
	return nil
}

// profiles names the profiles that size model directories.
func profiles() string {
	var out []string
	for _, d := range inTree() {
		if d.Profile != "" && d.Reads(descriptor.FormatONNX) {
			out = append(out, d.Profile)
		}
	}
	return strings.Join(out, ", ")
}
