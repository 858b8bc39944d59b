package estimator

import (
	"encoding/json"
	"testing"
)

// TestResultJSONShape pins the field names the CLI's --json and
// POST /v1/estimate promise.
func TestResultJSONShape(t *testing.T) {
	for _, b := range Backends {
		r, err := Estimate(Request{Backend: b, Model: "small"})
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(r)
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"backend", "model", "total_bytes", "recommended_bytes", "breakdown", "gpus", "suggestions", "explain", "key"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: no %q in %s", b, k, raw)
			}
		}
		if _, ok := m["gpus"].([]any); !ok {
			t.Errorf("%s: gpus is %T, want a list", b, m["gpus"])
		}
		bd := m["breakdown"].(map[string]any)
		for _, k := range []string{"weights", "kv_self", "kv_cross", "kv_pad", "compute", "context"} {
			if _, ok := bd[k]; !ok {
				t.Errorf("%s: breakdown lacks %q", b, k)
			}
		}
		if r.Breakdown.Sum() != r.TotalBytes || r.RecommendedBytes < r.TotalBytes {
			t.Errorf("%s: sum %d total %d recommended %d", b, r.Breakdown.Sum(), r.TotalBytes, r.RecommendedBytes)
		}
	}
	var req Request
	if err := json.Unmarshal([]byte(`{"backend":"whisper.cpp","model":"tiny","beam":5,"flash_attention":false,"gpus":[{"index":1,"name":"x","available_bytes":1024}]}`), &req); err != nil {
		t.Fatal(err)
	}
	if req.Beam != 5 || req.FlashAttention == nil || *req.FlashAttention || req.GPUs[0].AvailableBytes != 1024 {
		t.Errorf("request decoding: %+v", req)
	}
}
