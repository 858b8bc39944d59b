package descriptor

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/wsched/wsched/internal/confval"
)

// FuzzDescriptor: whatever a backend sends as its descriptor (JSON over
// the plugin protocol) and whatever an entry gives an option, decoding,
// checking and matching never panic; Check either names the offending key
// or returns only declared options.
func FuzzDescriptor(f *testing.F) {
	seed, _ := json.Marshal(sample)
	f.Add(seed, "beam", "4", "ggml-tiny.bin")
	f.Add([]byte(`{"name":"x","layouts":[{"kind":"dir","requires":[["["]]}],"options":[{"name":"e","type":"enum"}]}`), "e", "", "x")
	f.Add([]byte(`{"name":"x","options":[{"name":"t","type":"table","reserved":["*"]}]}`), "t", "{}", "")
	f.Fuzz(func(t *testing.T, raw []byte, name, value, file string) {
		var d Descriptor
		if json.Unmarshal(raw, &d) != nil {
			return
		}
		var v any = value
		if o, ok := d.Option(name); ok {
			switch o.Type {
			case TypeList:
				v = []any{value}
			case TypeTable:
				v = map[string]any{value: value}
			}
		}
		got, err := d.Check("m", map[string]any{name: v})
		var ke *confval.KeyError
		switch {
		case err != nil && !errors.As(err, &ke):
			t.Fatalf("Check: %v is not a KeyError", err)
		case err == nil:
			for k := range got {
				if _, ok := d.Option(k); !ok {
					t.Fatalf("Check returned undeclared option %q", k)
				}
			}
		}
		_ = d.Resolve(got)
		for _, l := range d.Layouts {
			l.Match(file)
			l.Files([]string{file, name, value})
		}
		_ = d.CPUOnly()
	})
}
