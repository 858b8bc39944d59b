package device

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Spec
	}{
		{"", Spec{Kind: Auto}},
		{"auto", Spec{Kind: Auto}},
		{" CUDA ", Spec{Kind: Auto}},
		{"cpu", Spec{Kind: CPU}},
		{"cuda:0", Spec{Kind: Index, Index: 0}},
		{"cuda:7", Spec{Kind: Index, Index: 7}},
		{"CUDA:12", Spec{Kind: Index, Index: 12}},
		{"GPU-5a1c0a4e-6d1f-4b0e-9f7b-2c2f6f1d9e01", Spec{Kind: UUID, UUID: "GPU-5a1c0a4e-6d1f-4b0e-9f7b-2c2f6f1d9e01"}},
		{"MIG-GPU-5a1c0a4e-6d1f-4b0e-9f7b-2c2f6f1d9e01/1/0", Spec{Kind: UUID, UUID: "MIG-GPU-5a1c0a4e-6d1f-4b0e-9f7b-2c2f6f1d9e01/1/0"}},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseInvalid(t *testing.T) {
	tests := map[string]string{
		"gpu1":                      `invalid device "gpu1": want one of auto, cuda, cuda:N, GPU-<uuid>, cpu`,
		"cuda:":                     `invalid device "cuda:": cuda:N needs a GPU index N >= 0`,
		"cuda:-1":                   `invalid device "cuda:-1": cuda:N needs a GPU index N >= 0`,
		"cuda:1a":                   `invalid device "cuda:1a": cuda:N needs a GPU index N >= 0`,
		"cuda:99999999999999999999": `invalid device "cuda:99999999999999999999": GPU index out of range`,
		"GPU-xyz":                   `invalid device "GPU-xyz": malformed GPU UUID`,
		"GPU-zzzzzzzzzz":            `invalid device "GPU-zzzzzzzzzz": malformed GPU UUID`,
		"cuda:0,1":                  `invalid device "cuda:0,1": cuda:N needs a GPU index N >= 0`,
	}
	for in, want := range tests {
		_, err := Parse(in)
		if !errors.Is(err, ErrInvalid) || err.Error() != want {
			t.Errorf("Parse(%q) error = %v\nwant %s", in, err, want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	spec, name, err := FromEnv(env(map[string]string{"SENSEVOICE_DEVICE": "cuda:1"}))
	if err != nil || name != "SENSEVOICE_DEVICE" || spec != (Spec{Kind: Index, Index: 1}) {
		t.Errorf("legacy: %+v %q %v", spec, name, err)
	}
	spec, name, err = FromEnv(env(map[string]string{"SENSEVOICE_DEVICE": "cuda:1", "WSCHED_DEVICE": "cpu"}))
	if err != nil || name != "WSCHED_DEVICE" || spec.Kind != CPU {
		t.Errorf("precedence: %+v %q %v", spec, name, err)
	}
	_, name, err = FromEnv(env(map[string]string{"WSCHED_DEVICE": "gpu7"}))
	if !errors.Is(err, ErrInvalid) || name != "WSCHED_DEVICE" {
		t.Errorf("invalid: %q %v", name, err)
	}
	if spec, name, err := FromEnv(env(nil)); err != nil || name != "" || spec.Kind != Auto {
		t.Errorf("unset: %+v %q %v", spec, name, err)
	}
}

// FuzzParse checks Parse never panics and that accepted strings print to a
// canonical form that parses back to the same Spec.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"auto", "cuda", "cuda:0", "cuda:15", "cpu", "GPU-5a1c0a4e-6d1f-4b0e-9f7b-2c2f6f1d9e01", "MIG-GPU-ab/1/0", "cuda:-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrInvalid", s, err)
			}
			return
		}
		again, err := Parse(spec.String())
		if err != nil || again != spec {
			t.Fatalf("Parse(%q) = %+v, String %q parses to %+v, %v", s, spec, spec.String(), again, err)
		}
	})
}
