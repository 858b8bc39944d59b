package daemon

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/wsched/wsched/estimator"
)

// TestEstimatorSamples: POST /v1/estimator/samples answers what the state
// database holds for an estimate key or a CUDA context key, and refuses a
// body with neither or both.
func TestEstimatorSamples(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, nil)
	key := estimator.Key{Backend: estimator.WhisperCpp, Model: "tiny", Precision: "f16", Beam: 5, Batch: 1, GPUModel: "Sim GPU", Driver: "580"}
	for _, b := range []int64{900 << 20, 950 << 20} {
		if err := td.d.db.RecordPeak(key, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := td.d.db.RecordContext(estimator.ContextKey("Sim GPU", "580.1"), 518<<20); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		body   string
		status int
		want   []int64
	}{
		{`{"key": {"backend": "whisper.cpp", "model": "tiny", "precision": "f16", "beam": 5, "batch": 1, "gpu_model": "Sim GPU", "driver": "580"}}`,
			http.StatusOK, []int64{900 << 20, 950 << 20}},
		{`{"context": "Sim GPU|580"}`, http.StatusOK, []int64{518 << 20}},
		{`{"context": "Other GPU"}`, http.StatusOK, []int64{}},
		{`{}`, http.StatusBadRequest, nil},
		{`{"context": "x", "key": {"model": "tiny"}}`, http.StatusBadRequest, nil},
		{`{"contexts": "x"}`, http.StatusBadRequest, nil},
	} {
		status, out := td.raw("POST", "/v1/estimator/samples", tt.body)
		if status != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.body, status, out, tt.status)
			continue
		}
		if tt.want == nil {
			continue
		}
		var got struct{ Samples []int64 }
		if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Samples) != len(tt.want) {
			t.Errorf("%s: %s (%v), want %v", tt.body, out, err, tt.want)
			continue
		}
		for i := range tt.want {
			if got.Samples[i] != tt.want[i] {
				t.Errorf("%s: %v, want %v", tt.body, got.Samples, tt.want)
			}
		}
	}
}
