package models

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/confval"
	"github.com/wsched/wsched/plugins/descriptor"
)

// Check validates the [[models.model]] entries against the descriptors of
// the backends that serve them: options by name and type, memory where the
// backend has no estimator profile, VAD where it can do none. An entry
// whose backend is not among backends is not checked (the registry marks
// its model unavailable). The error is a *confval.KeyError naming the key
// ("models.model#2.options.language").
func Check(m config.Models, backends descriptor.Set) error {
	for i, e := range m.Entries {
		key := fmt.Sprintf("models.model#%d", i)
		d, err := backends.Lookup(e.Backend)
		if errors.Is(err, descriptor.ErrUnknownBackend) {
			continue
		}
		if err := checkEntry(key, e, d); err != nil {
			return err
		}
	}
	return nil
}

func checkEntry(key string, e config.Model, d descriptor.Descriptor) error {
	path, settings := modelPath(e, d)
	pathKey := d.PathKey
	if pathKey == "" {
		pathKey = "path"
	}
	switch {
	case path == "":
		return confval.Bad(key+"."+pathKey, "is empty: backend %q loads a model from it", d.Name)
	case !d.Sized() && e.Memory <= 0:
		return confval.Bad(key+".memory", "is required for backend %q: no estimator profile sizes its models; measure the peak (wsched run, then wsched leases) and set it, e.g. memory = \"6GiB\"", d.Name)
	case e.VAD && !d.VAD || e.VADModel != "" && !d.VAD:
		return confval.Bad(key+".vad", "backend %q cannot do voice activity detection; remove vad and vad_model", d.Name)
	case e.VAD && e.VADModel == "":
		return confval.Bad(key+".vad", "is true but vad_model is empty: want the VAD model file (whisper.cpp: a silero ggml file such as ggml-silero-v5.1.2.bin)")
	}
	_, err := d.Check(key, settings)
	return shorthandKey(err, key, e)
}

// shorthandKey names an option set at the entry's top level by that key
// (models.model#0.command), not by its place in the options table.
func shorthandKey(err error, key string, e config.Model) error {
	var ke *confval.KeyError
	if !errors.As(err, &ke) {
		return err
	}
	name, ok := strings.CutPrefix(ke.Key, key+".options.")
	if _, inTable := e.Options[name]; ok && !inTable {
		return confval.Bad(key+"."+name, "%s", ke.Msg)
	}
	return err
}
