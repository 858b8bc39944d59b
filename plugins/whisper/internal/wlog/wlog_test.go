package wlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMB(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "77.11 MB", want: 77_110_000},
		{in: "0.00 MB", want: 0},
		{in: "3093.99 MB", want: 3_093_990_000},
		{in: "6.29 MB", want: 6_290_000},
		{in: "12 MB", want: 12_000_000},
		{in: "1.5 MB", want: 1_500_000},
		{in: "77.11 MiB", wantErr: true},
		{in: "-1.00 MB", wantErr: true},
		{in: ".5 MB", wantErr: true},
		{in: "1.2.3 MB", wantErr: true},
		{in: "1.1234567 MB", wantErr: true},
		{in: "99999999999999 MB", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tc := range tests {
		got, err := ParseMB(tc.in)
		if tc.wantErr {
			if !errors.Is(err, ErrNotMB) {
				t.Errorf("ParseMB(%q) error = %v, want ErrNotMB", tc.in, err)
			}
			continue
		}
		if err != nil || got.Bytes != tc.want || got.Printed != tc.in {
			t.Errorf("ParseMB(%q) = %+v, %v; want %d bytes", tc.in, got, err, tc.want)
		}
	}
}

func TestAdd(t *testing.T) {
	tests := []struct {
		line      string
		ok        bool
		size      string
		wantBytes int64
		value     string
		wantValue string
	}{
		{line: "whisper_init_state: kv self size  =    6.29 MB\n", ok: true, size: "kv_self_size", wantBytes: 6_290_000},
		{line: "whisper_init_state: compute buffer (conv)   =   14.15 MB", ok: true, size: "compute_buffer_conv", wantBytes: 14_150_000},
		{line: "whisper_model_load:          CPU total size =    77.11 MB", ok: true, size: "cpu_total_size", wantBytes: 77_110_000},
		{line: "whisper_model_load: n_vocab       = 51864", ok: true, value: "n_vocab", wantValue: "51864"},
		{line: "whisper_model_load: type          = 1 (tiny)", ok: true, value: "type", wantValue: "1 (tiny)"},
		{line: "whisper_init_with_params_no_state: flash attn = 0", ok: true, value: "flash_attn", wantValue: "0"},
		{line: "whisper_full_with_state: auto-detected language: en (p = 0.97)", ok: false},
		{line: "load_backend: loaded CPU backend from /usr/lib/x.so", ok: false},
		{line: "no colon = here", ok: false},
		{line: "", ok: false},
	}
	for _, tc := range tests {
		r := NewReport()
		if got := r.Add(tc.line); got != tc.ok {
			t.Errorf("Add(%q) = %v, want %v", tc.line, got, tc.ok)
			continue
		}
		if tc.size != "" && r.Sizes[tc.size].Bytes != tc.wantBytes {
			t.Errorf("Add(%q): Sizes[%s] = %+v, want %d bytes", tc.line, tc.size, r.Sizes[tc.size], tc.wantBytes)
		}
		if tc.value != "" && r.Values[tc.value] != tc.wantValue {
			t.Errorf("Add(%q): Values[%s] = %q, want %q", tc.line, tc.value, r.Values[tc.value], tc.wantValue)
		}
	}
}

// TestRecordedLogs parses every log captured from whisper.cpp 1.9.5 and checks that the figures the
// estimator needs are there.
func TestRecordedLogs(t *testing.T) {
	logs, err := filepath.Glob("../../../../estimator/testdata/whispercpp-1.9.5/*.log")
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) == 0 {
		t.Skip("no recorded logs")
	}
	want := []string{"kv_self_size", "kv_cross_size", "kv_pad_size", "compute_buffer_conv",
		"compute_buffer_encode", "compute_buffer_cross", "compute_buffer_decode", "cpu_total_size", "model_size"}
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		r := NewReport()
		for _, line := range strings.Split(string(data), "\n") {
			r.Add(line)
		}
		for _, name := range want {
			if _, ok := r.Sizes[name]; !ok {
				t.Errorf("%s: no %s", filepath.Base(path), name)
			}
		}
		if n, ok := r.Int("n_vocab"); !ok || n < 51864 {
			t.Errorf("%s: n_vocab = %d, %v", filepath.Base(path), n, ok)
		}
	}
}

func FuzzAdd(f *testing.F) {
	f.Add("whisper_init_state: kv self size  =    6.29 MB")
	f.Add("whisper_model_load: n_vocab       = 51864")
	f.Add("whisper_model_load:          CPU total size =    77.11 MB")
	f.Fuzz(func(t *testing.T, line string) {
		r := NewReport()
		r.Add(line)
		for name, fig := range r.Sizes {
			if fig.Bytes < 0 || name == "" {
				t.Fatalf("Add(%q) gave %q = %+v", line, name, fig)
			}
		}
	})
}
