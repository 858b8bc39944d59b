package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestSimReadsStdin: "-" names stdin for --trace and --workload, so that
// `wsched jobs --trace | wsched sim --trace -` works.
func TestSimReadsStdin(t *testing.T) {
	trace := `{"kind":"trace","origin":"2026-11-27T10:00:00Z","jobs":2,"lease_events":1}
{"kind":"job","arrival":0,"audio_seconds":11,"model":"tiny","priority":"normal","uid":0,"id":"job-a","state":"completed","attempts":1,"gpu_index":-1}
{"kind":"job","arrival":0.5,"audio_seconds":132,"model":"tiny","priority":"normal","uid":0,"id":"job-b","state":"completed","attempts":1,"gpu_index":-1}
{"kind":"lease","time":0.1,"event":"granted","lease":"l-1","gpu_index":0,"bytes":1000,"uid":0,"job":"job-a"}
`
	workload := `{"arrival": 0, "audio_seconds": 600, "model": "base"}
{"arrival": 1, "audio_seconds": 5, "model": "base"}
{"arrival": 2, "audio_seconds": 7, "model": "base"}
`
	for _, tc := range []struct {
		flag, in string
		jobs     float64
	}{{"--trace", trace, 2}, {"--workload", workload, 3}} {
		var out, errOut bytes.Buffer
		err := run(t.Context(), []string{"sim", tc.flag, "-", "--policy", "wsched", "--gpus", "1", "--json"},
			streams{in: strings.NewReader(tc.in), out: &out, err: &errOut}, func(string) (string, bool) { return "", false })
		if err != nil {
			t.Errorf("sim %s -: %v\n%s", tc.flag, err, errOut.String())
			continue
		}
		var r struct {
			Jobs float64 `json:"jobs"`
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Jobs != tc.jobs {
			t.Errorf("sim %s -: %v, %s; want %v jobs", tc.flag, err, out.String(), tc.jobs)
		}
	}
}
