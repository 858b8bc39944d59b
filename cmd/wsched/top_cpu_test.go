package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
)

// TestTopJobOnCPU: a job placed on the CPU (its lease's GPU is "cpu", its
// index -1) shows no GPU on its row, as in `wsched jobs`, not "GPU -1".
func TestTopJobOnCPU(t *testing.T) {
	m := newTopModel(topStyles(&app{streams: streams{out: io.Discard}, lookupEnv: func(string) (string, bool) { return "", false }}))
	m.jobs["job-cpu"] = api.Job{ID: "job-cpu", State: api.JobProcessing, GPUIndex: -1, GPUUUID: "cpu", LeaseID: "l-1", Created: time.Now()}
	m.jobs["job-gpu"] = api.Job{ID: "job-gpu", State: api.JobProcessing, GPUIndex: 1, GPUUUID: "GPU-abc", LeaseID: "l-2", Created: time.Now()}
	var b strings.Builder
	m.viewJobs(&b)
	out := b.String()
	if strings.Contains(out, "GPU -1") || !strings.Contains(out, "GPU 1") {
		t.Errorf("jobs on the CPU and on GPU 1:\n%s", out)
	}
}
