package plugintest_test

import (
	"errors"
	"maps"
	"testing"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
)

func TestParseMemory(t *testing.T) {
	tests := []struct {
		spec    string
		want    plugins.MemoryReport
		wantErr bool
	}{
		{spec: "model=1,kv_self=2,kv_cross=3,kv_pad=4,total=99,compute.encode=5,compute.decode=6",
			want: plugins.MemoryReport{ModelBytes: 1, KVSelfBytes: 2, KVCrossBytes: 3, KVPadBytes: 4, TotalBytes: 99,
				ComputeBytes: map[string]int64{"encode": 5, "decode": 6}}},
		{spec: " model=7 ", want: plugins.MemoryReport{ModelBytes: 7, ComputeBytes: map[string]int64{}}},
		{spec: "model=-1", wantErr: true},
		{spec: "model=1GiB", wantErr: true},
		{spec: "vram=1", wantErr: true},
		{spec: "compute.=1", wantErr: true},
		{spec: "model", wantErr: true},
		{spec: "model=1,", wantErr: true},
	}
	for _, tt := range tests {
		got, err := plugintest.ParseMemory(tt.spec)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseMemory(%q) error = %v, want error %v", tt.spec, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && !equal(got, tt.want) {
			t.Errorf("ParseMemory(%q) = %+v, want %+v", tt.spec, got, tt.want)
		}
	}
	def, err := plugintest.ParseMemory("")
	if err != nil || def.Sum() == 0 {
		t.Errorf("default memory report = %+v, %v; want a non-empty report", def, err)
	}
}

func equal(a, b plugins.MemoryReport) bool {
	return a.ModelBytes == b.ModelBytes && a.KVSelfBytes == b.KVSelfBytes && a.KVCrossBytes == b.KVCrossBytes &&
		a.KVPadBytes == b.KVPadBytes && a.TotalBytes == b.TotalBytes && maps.Equal(a.ComputeBytes, b.ComputeBytes)
}

// FuzzParseMemory checks that any spec parses to non-negative sizes or
// fails, and never panics.
func FuzzParseMemory(f *testing.F) {
	for _, s := range []string{"", plugintest.DefaultMemory, "model=1,compute.x=2", "total=9223372036854775807", "=,="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		rep, err := plugintest.ParseMemory(spec)
		if err != nil {
			return
		}
		for _, v := range append([]int64{rep.ModelBytes, rep.KVSelfBytes, rep.KVCrossBytes, rep.KVPadBytes, rep.TotalBytes},
			mapsValues(rep.ComputeBytes)...) {
			if v < 0 {
				t.Fatalf("ParseMemory(%q) = %+v: negative size", spec, rep)
			}
		}
	})
}

func mapsValues(m map[string]int64) []int64 {
	var out []int64
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func TestSentinel(t *testing.T) {
	for name, want := range map[string]error{
		"model_not_found": plugins.ErrModelNotFound, "bad_model": plugins.ErrBadModel, "bad_audio": plugins.ErrBadAudio,
		"bad_request": plugins.ErrBadRequest, "oom": plugins.ErrOutOfMemory, "not_loaded": plugins.ErrNotLoaded,
		"unavailable": plugins.ErrUnavailable,
	} {
		if got := plugintest.Sentinel(name); !errors.Is(got, want) {
			t.Errorf("Sentinel(%q) = %v, want %v", name, got, want)
		}
	}
	if err := plugintest.Sentinel("disk on fire"); err == nil || errors.Is(err, plugins.ErrUnavailable) {
		t.Errorf("Sentinel of unknown text = %v, want a plain error", err)
	}
}

func TestEnv(t *testing.T) {
	if got := plugintest.EnvVar(plugintest.CrashAfter, "2"); got != "WSCHED_FAKE_CRASH_AFTER=2" {
		t.Errorf("EnvVar = %q", got)
	}
}
