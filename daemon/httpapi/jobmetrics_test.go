package httpapi

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/placement"
)

func TestEstimateRatio(t *testing.T) {
	m := newJobMetrics(nil)
	key := &estimator.Key{Backend: "whisper", Model: "large-v3"}
	for _, ev := range []placement.Event{
		{Type: placement.EventReleased, Lease: placement.Lease{Bytes: 1000, PeakBytes: 1100, EstimateKey: key}}, // 1.1
		{Type: placement.EventExpired, Lease: placement.Lease{Bytes: 1000, PeakBytes: 600, EstimateKey: key}},   // 0.6
		{Type: placement.EventReleased, Lease: placement.Lease{Bytes: 1000, PeakBytes: 900}},                    // not estimated
		{Type: placement.EventGranted, Lease: placement.Lease{Bytes: 1000, PeakBytes: 900, EstimateKey: key}},   // not ended
		{Type: placement.EventReleased, Lease: placement.Lease{Bytes: 1000, EstimateKey: key}},                  // never measured
	} {
		m.lease(ev)
	}
	const want = `
# HELP wsched_estimate_measured_ratio Measured peak GPU memory divided by the estimate, for ended leases the estimator sized (above 1: underestimated).
# TYPE wsched_estimate_measured_ratio histogram
wsched_estimate_measured_ratio_bucket{backend="whisper",model="large-v3",le="0.25"} 0
wsched_estimate_measured_ratio_bucket{backend="whisper",model="large-v3",le="0.5"} 0
wsched_estimate_measured_ratio_bucket{backend="whisper",model="large-v3",le="0.7"} 1
wsched_estimate_measured_ratio_bucket{backend="whisper",model="large-v3",le="0.8"} 1
wsched_estimate_measured_ratio_bucket{backend="whisper",model="large-v3",le="0.9"} 1
wsched_estimate_measured_ratio_bucket{backend="whisper",model="large-v3",le="0.95"} 1
wsched_estimate_measured_ratio_bucket{backend="whisper",model="large-v3",le="1"} 1
wsched_estimate_measured_ratio_bucket{backend="whisper",model="large-v3",le="1.05"} 1
wsched_estimate_measured_ratio_bucket{backend="whisper",model="large-v3",le="1.1"} 2
wsched_estimate_measured_ratio_bucket{backend="whisper",model="large-v3",le="1.25"} 2
wsched_estimate_measured_ratio_bucket{backend="whisper",model="large-v3",le="1.5"} 2
wsched_estimate_measured_ratio_bucket{backend="whisper",model="large-v3",le="2"} 2
wsched_estimate_measured_ratio_bucket{backend="whisper",model="large-v3",le="+Inf"} 2
wsched_estimate_measured_ratio_sum{backend="whisper",model="large-v3"} 1.7000000000000002
wsched_estimate_measured_ratio_count{backend="whisper",model="large-v3"} 2
`
	if err := testutil.CollectAndCompare(m.estimate, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
