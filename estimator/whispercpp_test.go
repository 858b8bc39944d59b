package estimator

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/estimator/ggml"
	"github.com/wsched/wsched/internal/units"
)

func header(t *testing.T, file string) *ggml.Model {
	t.Helper()
	m, err := ggml.ReadFile(filepath.Join(testModels, file))
	if err != nil {
		t.Skipf("model file: %v", err)
	}
	return m
}

// TestWhisperCppFromFileAndTableAgree: a known-model estimate equals the one
// from the for-tests file of the same model (same hparams, f16).
func TestWhisperCppFromFileAndTableAgree(t *testing.T) {
	for _, c := range []struct{ file, model string }{
		{"for-tests-ggml-tiny.bin", "tiny"}, {"for-tests-ggml-base.en.bin", "base.en"},
		{"for-tests-ggml-small.bin", "small"}, {"for-tests-ggml-medium.bin", "medium"},
		{"for-tests-ggml-large.bin", "large-v2"},
	} {
		fromFile, err := Estimate(Request{Backend: WhisperCpp, Model: c.model, Header: header(t, c.file)})
		if err != nil {
			t.Fatal(err)
		}
		fromTable, err := Estimate(Request{Backend: WhisperCpp, Model: c.model})
		if err != nil {
			t.Fatal(err)
		}
		if fromFile.TotalBytes != fromTable.TotalBytes || fromFile.Breakdown != fromTable.Breakdown {
			t.Errorf("%s: file %+v\ntable %+v", c.model, fromFile.Breakdown, fromTable.Breakdown)
		}
		if got := fromFile.Breakdown.Sum(); got != fromFile.TotalBytes {
			t.Errorf("%s: breakdown sums to %d, total %d", c.model, got, fromFile.TotalBytes)
		}
	}
}

func TestWhisperCppComponents(t *testing.T) {
	on, off := true, false
	base := Request{Backend: WhisperCpp, Model: "medium"}
	r, err := Estimate(base)
	if err != nil {
		t.Fatal(err)
	}
	b := r.Breakdown
	// medium: n_text_state 1024, 24 layers.
	if want := int64(4 * 1024 * 24 * 512); b.KVSelf != want {
		t.Errorf("kv_self %d, want 4·1024·24·512 = %d", b.KVSelf, want)
	}
	if want := int64(4 * 1024 * 24 * 1536); b.KVCross != want {
		t.Errorf("kv_cross %d, want %d", b.KVCross, want)
	}
	if want := int64(4 * 1024 * 1536); b.KVPad != want {
		t.Errorf("kv_pad %d, want %d", b.KVPad, want)
	}
	if b.Context != DefaultCUDAContextBytes || b.Weights != 1533143040 {
		t.Errorf("context %d weights %d", b.Context, b.Weights)
	}
	logits := int64(4 * 51865 * 448)
	if b.ComputeDecode < logits || b.ComputeDecode > logits+8*448*1024 {
		t.Errorf("decode %d not logits %d + two activations", b.ComputeDecode, logits)
	}
	beam := base
	beam.Beam = 5
	rb, _ := Estimate(beam)
	if rb.Breakdown.KVSelf != 7*b.KVSelf {
		t.Errorf("beam 5: kv_self %d, want ×7 = %d", rb.Breakdown.KVSelf, 7*b.KVSelf)
	}
	bestOf := base
	bestOf.BestOf = 2
	if rbo, _ := Estimate(bestOf); rbo.Breakdown.KVSelf != 4*b.KVSelf {
		t.Errorf("best_of 2: kv_self ×%d, want ×4", rbo.Breakdown.KVSelf/b.KVSelf)
	}
	noFA := base
	noFA.FlashAttention = &off
	rn, _ := Estimate(noFA)
	// without flash attention: KQ (1500² × 16 heads) + 4 activations instead
	// of the MLP's 7.
	if d := rn.Breakdown.ComputeEncode - b.ComputeEncode; d != 4*1500*1500*16+16*1500*1024-28*1500*1024 {
		t.Errorf("no flash attention adds %d to encode (%d vs %d)", d, rn.Breakdown.ComputeEncode, b.ComputeEncode)
	}
	fa := base
	fa.FlashAttention = &on
	if rf, _ := Estimate(fa); rf.TotalBytes != r.TotalBytes {
		t.Error("flash attention is the default")
	}
	procs := base
	procs.Processors = 2
	rp, _ := Estimate(procs)
	if rp.Breakdown.Weights != b.Weights || rp.Breakdown.KVCross != 2*b.KVCross || rp.Breakdown.Compute != 2*b.Compute {
		t.Errorf("2 processors share weights, double state: %+v", rp.Breakdown)
	}
	seg := base
	seg.SegmentSeconds = 600
	rs, _ := Estimate(seg)
	if rs.TotalBytes != r.TotalBytes {
		t.Error("segment length changed the whisper.cpp estimate")
	}
	for _, s := range append(rs.Suggestions, rn.Suggestions...) {
		if strings.Contains(strings.ToLower(s), "segment") {
			t.Errorf("whisper.cpp suggestion mentions segments: %q", s)
		}
	}
	if !strings.Contains(strings.Join(rn.Suggestions, "\n"), "flash attention") ||
		!strings.Contains(strings.Join(rb.Suggestions, "\n"), "greedy") ||
		!strings.Contains(strings.Join(r.Suggestions, "\n"), "q5_0") {
		t.Errorf("missing suggestions: %q / %q / %q", rn.Suggestions, rb.Suggestions, r.Suggestions)
	}
}

func TestWhisperCppQuantizedAndPrecision(t *testing.T) {
	f16, _ := Estimate(Request{Model: "large-v3"})
	q5, err := Estimate(Request{Model: "large-v3", Precision: "q5_0"})
	if err != nil {
		t.Fatal(err)
	}
	if q5.Precision != "q5_0" || q5.Breakdown.Weights >= f16.Breakdown.Weights/2 {
		t.Errorf("q5_0 weights %d vs f16 %d", q5.Breakdown.Weights, f16.Breakdown.Weights)
	}
	if _, err := Estimate(Request{Model: "tiny", Precision: "q4_K"}); err == nil {
		t.Error("tiny (n_state 384) cannot be q4_K: rows are not multiples of 256")
	}
	if _, err := Estimate(Request{Model: "tiny", Precision: "fp8"}); !errors.Is(err, ErrUnknownPrecision) {
		t.Errorf("fp8: %v", err)
	}
	if _, err := Estimate(Request{Model: "huge"}); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("huge: %v", err)
	}
	if _, err := Estimate(Request{Backend: "onnx", Model: "tiny"}); !errors.Is(err, ErrUnknownBackend) {
		t.Errorf("onnx: %v", err)
	}
	if _, err := Estimate(Request{Model: "tiny", Beam: -1}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("beam -1: %v", err)
	}
	turbo, _ := Estimate(Request{Model: "turbo"})
	if turbo.Model != "large-v3-turbo" || turbo.Breakdown.KVSelf != 4*1280*4*512 {
		t.Errorf("turbo: %s kv_self %d", turbo.Model, turbo.Breakdown.KVSelf)
	}
}

func TestGPUFitAndLargestModel(t *testing.T) {
	r, err := Estimate(Request{Model: "medium", GPUs: []GPUFree{
		{Index: 0, Name: "A", AvailableBytes: 24 * GiB}, {Index: 1, Name: "B", AvailableBytes: 1 * GiB}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GPUs) != 2 || !r.GPUs[0].Sufficient || r.GPUs[1].Sufficient || r.GPUs[1].Copies != 0 {
		t.Fatalf("fits: %+v", r.GPUs)
	}
	if want := 24 * GiB / r.RecommendedBytes; r.GPUs[0].Copies != want {
		t.Errorf("copies %d, want %d", r.GPUs[0].Copies, want)
	}
	e := New(Config{}, nil)
	name, res, fits, err := e.LargestModel(Request{Backend: WhisperCpp}, 2*GiB)
	if err != nil || !fits || name != "small" || res.RecommendedBytes > 2*GiB {
		t.Errorf("2 GiB whisper.cpp: %s %v %v (%s)", name, fits, err, units.FormatBytes(res.RecommendedBytes))
	}
	name, _, fits, _ = e.LargestModel(Request{Backend: WhisperCpp}, 100*MiB)
	if fits || name != "tiny" {
		t.Errorf("100 MiB: %s fits=%v, want tiny, false", name, fits)
	}
	name, _, _, _ = e.LargestModel(Request{Backend: WhisperCpp, Model: "x.en"}, 3*GiB)
	if !strings.HasSuffix(name, ".en") {
		t.Errorf(".en request chose %s", name)
	}
}
