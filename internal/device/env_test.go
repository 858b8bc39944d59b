package device

import (
	"errors"
	"strings"
	"testing"
)

func lookupOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

const leasedGPU = "GPU-5a1c0a4e-6d1f-4b0e-9f7b-2c2f6f1d9e01"

// TestPinFromEnvInsideLease (issue 23, item 2): the cuda:N a lease
// exported names the lease's visible GPU; contradictions are errors that
// say why; outside a lease nothing changes.
func TestPinFromEnvInsideLease(t *testing.T) {
	lease := map[string]string{"WSCHED_LEASE_ID": "l-1", "CUDA_VISIBLE_DEVICES": leasedGPU, "SENSEVOICE_DEVICE": "cuda:0"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range lease {
			m[k] = v
		}
		for k, v := range extra {
			if v == "<unset>" {
				delete(m, k)
				continue
			}
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		env      map[string]string
		want     string // Spec.String()
		relative bool
		err      string
	}{
		{"lease's own cuda:0", with(nil), leasedGPU, true, ""},
		{"outside a lease", with(map[string]string{"WSCHED_LEASE_ID": "<unset>"}), "cuda:0", false, ""},
		{"no pin", with(map[string]string{"SENSEVOICE_DEVICE": "<unset>"}), "auto", false, ""},
		{"cpu", with(map[string]string{"WSCHED_DEVICE": "cpu"}), "cpu", false, ""},
		{"by index", with(map[string]string{"CUDA_VISIBLE_DEVICES": "3,5", "SENSEVOICE_DEVICE": "cuda:1"}), "cuda:5", true, ""},
		{"the leased UUID", with(map[string]string{"WSCHED_DEVICE": leasedGPU}), leasedGPU, false, ""},
		{"index past the visible", with(map[string]string{"WSCHED_DEVICE": "cuda:1"}), "", false,
			"WSCHED_DEVICE=cuda:1 inside lease l-1: CUDA_VISIBLE_DEVICES=" + leasedGPU + " makes only cuda:0 visible"},
		{"hidden UUID", with(map[string]string{"WSCHED_DEVICE": "GPU-00000000-0000-0000-0000-000000000001"}), "", false,
			"CUDA_VISIBLE_DEVICES=" + leasedGPU + " hides that GPU"},
		{"CPU lease", with(map[string]string{"CUDA_VISIBLE_DEVICES": ""}), "", false,
			"SENSEVOICE_DEVICE=cuda:0 inside lease l-1: CUDA_VISIBLE_DEVICES is empty (a CPU lease)"},
		{"bad entry", with(map[string]string{"CUDA_VISIBLE_DEVICES": "x"}), "", false, `CUDA_VISIBLE_DEVICES entry "x" names no GPU`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PinFromEnv(lookupOf(tc.env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || p.Spec.String() != tc.want || p.Relative != tc.relative {
				t.Fatalf("pin %+v (%s) %v, want %s relative=%v", p, p.Spec, err, tc.want, tc.relative)
			}
		})
	}
}

// FuzzPinFromEnv checks PinFromEnv never panics, that its errors wrap
// ErrInvalid or name CUDA_VISIBLE_DEVICES, and that a pin inside a lease
// is one of the visible devices.
func FuzzPinFromEnv(f *testing.F) {
	f.Add("cuda:0", leasedGPU, "l-1")
	f.Add("cuda:1", "3,5", "l-2")
	f.Add(leasedGPU, "", "l-3")
	f.Add("cpu", "GPU-a,GPU-b", "")
	f.Fuzz(func(t *testing.T, pin, visible, lease string) {
		p, err := PinFromEnv(lookupOf(map[string]string{"WSCHED_DEVICE": pin, "CUDA_VISIBLE_DEVICES": visible, "WSCHED_LEASE_ID": lease}))
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !strings.Contains(err.Error(), "CUDA_VISIBLE_DEVICES") {
				t.Fatalf("error %v neither wraps ErrInvalid nor names CUDA_VISIBLE_DEVICES", err)
			}
			return
		}
		if p.Relative && p.Spec.Kind != UUID && p.Spec.Kind != Index {
			t.Fatalf("relative pin %+v is not a GPU", p)
		}
	})
}
