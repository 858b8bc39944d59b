package sim

import (
	"strings"
	"testing"

	"github.com/wsched/wsched/placement"
)

const sampleTrace = `{"kind":"trace","origin":"2026-11-27T10:00:00Z","jobs":3,"lease_events":3}
{"kind":"job","arrival":1.5,"audio_seconds":40,"model":"fake-tiny","priority":"low","uid":1000,"id":"job-b","state":"completed","attempts":1,"gpu_index":0}
{"kind":"job","arrival":0,"audio_seconds":3,"model":"tiny","priority":"high","uid":0,"id":"job-a","state":"failed","attempts":2,"gpu_index":-1}
{"kind":"job","arrival":2,"audio_seconds":0,"model":"tiny","priority":"normal","uid":0,"id":"job-c","state":"pending","attempts":0,"gpu_index":-1}
{"kind":"lease","time":0.1,"event":"granted","lease":"l-1","gpu_index":0,"bytes":1000,"uid":0,"job":"job-a"}
{"kind":"lease","time":0.2,"event":"granted","lease":"l-2","gpu_index":0,"bytes":500,"uid":0}
{"kind":"lease","time":0.3,"event":"released","lease":"l-1","gpu_index":0,"bytes":1000,"uid":0}
`

// TestReadTrace: job lines become the workload in arrival order (their
// extra keys ignored, unknown durations left out and counted), lease lines
// are summarised.
func TestReadTrace(t *testing.T) {
	tr, err := ReadTrace(strings.NewReader(sampleTrace))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Jobs) != 2 || tr.Jobs[0].AudioSeconds != 3 || tr.Jobs[0].Priority != placement.High || tr.Jobs[1].Priority != placement.Low ||
		tr.Jobs[1].UID != 1000 || tr.Jobs[1].Model != "fake-tiny" {
		t.Errorf("jobs %+v", tr.Jobs)
	}
	if tr.Skipped != 1 || tr.LeaseEvents != 3 || tr.Granted != 2 || tr.PeakLeasedBytes != 1500 {
		t.Errorf("trace %+v", tr)
	}
	for _, bad := range []string{`{"kind":"job","arrival":-1,"audio_seconds":3,"model":"tiny"}`, `{"kind":"other"}`, `not json`, `{"kind":"trace"}`} {
		if _, err := ReadTrace(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: read", bad)
		}
	}
	if _, err := ReadTrace(strings.NewReader(`{"arrival":0,"audio_seconds":3,"model":"tiny"}`)); err != nil {
		t.Errorf("a workload line as a trace: %v", err)
	}
}

// FuzzReadTrace: any input reads or fails without panicking; jobs read are
// valid workload jobs in arrival order.
func FuzzReadTrace(f *testing.F) {
	f.Add(sampleTrace)
	f.Add(`{"kind":"lease","event":"resized","lease":"x","bytes":-5}`)
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := ReadTrace(strings.NewReader(s))
		if err != nil {
			return
		}
		for i, j := range tr.Jobs {
			if !(j.AudioSeconds > 0) || j.Arrival < 0 || j.Model == "" || i > 0 && j.Arrival < tr.Jobs[i-1].Arrival {
				t.Fatalf("job %d: %+v", i, j)
			}
		}
	})
}
