package daemon

import (
	"fmt"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/plugins/plugintest"
)

// TestCancelKeepsSharedInstance: cancelling one of two jobs that share an
// instance (max_streams > 1) does not condemn the instance: each call has
// a decoding state of its own, so once the other job ends the instance
// stays warm for the next job. A cancelled job's one-stream instance is
// still dropped (TestCancelDropsOneStreamInstance).
func TestCancelKeepsSharedInstance(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.Segments), "20")
	t.Setenv(plugintest.Env(plugintest.SegmentDelay), "100ms")
	td, audio := jobDaemon(t, GiB, func(c *config.Config) { c.Models.Entries[0].MaxStreams = 4 })
	processing := func(j jobs.Job) bool { return j.State == jobs.Processing || j.State.Finished() }
	a := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	td.waitJob(t, a.ID, processing)
	b := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	td.waitJob(t, b.ID, processing)
	inst := backendsOf(t, td).Instances
	if len(inst) != 1 || inst[0].Streams != 2 {
		t.Fatalf("instances %+v: want one serving both jobs", inst)
	}
	pid := inst[0].PID
	if status, out := td.raw("DELETE", "/v1/jobs/"+a.ID, ""); status != 200 {
		t.Fatalf("cancel: %d %s", status, out)
	}
	if got := td.waitJob(t, a.ID, finished); got.State != jobs.Cancelled {
		t.Fatalf("cancelled job: %s", got.State)
	}
	if got := td.waitJob(t, b.ID, finished); got.State != jobs.Completed {
		t.Fatalf("other job: %s (%s)", got.State, got.Error)
	}
	inst = backendsOf(t, td).Instances
	if len(inst) != 1 || inst[0].PID != pid || inst[0].State != "idle" {
		t.Fatalf("after one of its jobs was cancelled and the other ended: instances %+v, want pid %d warm", inst, pid)
	}
}

// TestCancelDropsOneStreamInstance: a cancelled job's instance that serves
// one stream at most is stopped rather than kept warm (the backend's state
// after an aborted call is not worth keeping).
func TestCancelDropsOneStreamInstance(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.Segments), "20")
	t.Setenv(plugintest.Env(plugintest.SegmentDelay), "100ms")
	td, audio := jobDaemon(t, GiB, func(c *config.Config) { c.Models.Entries[0].MaxStreams = 1 })
	a := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	td.waitJob(t, a.ID, func(j jobs.Job) bool { return j.State == jobs.Processing || j.State.Finished() })
	if status, out := td.raw("DELETE", "/v1/jobs/"+a.ID, ""); status != 200 {
		t.Fatalf("cancel: %d %s", status, out)
	}
	td.waitJob(t, a.ID, finished)
	for i := 0; len(backendsOf(t, td).Instances) > 0; i++ {
		if i > 1000 {
			t.Fatalf("instances %+v still there after their job was cancelled", backendsOf(t, td).Instances)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTimeoutDropsSharedInstance: a job that timed out on a shared
// instance still condemns it (a timeout may mean a wedged backend, which
// the next jobs' streams should not meet).
func TestTimeoutDropsSharedInstance(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.Segments), "50")
	t.Setenv(plugintest.Env(plugintest.SegmentDelay), "100ms")
	td, audio := jobDaemon(t, GiB, func(c *config.Config) {
		c.Models.Entries[0].MaxStreams = 4
		c.Jobs.Timeout, c.Jobs.MaxRetries = units.Duration(time.Second), 0
	})
	a := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	if got := td.waitJob(t, a.ID, finished); got.State != jobs.Failed || got.ErrorKind != "timeout" {
		t.Fatalf("job %s (%s %s), want failed by its timeout", got.State, got.ErrorKind, got.Error)
	}
	for i := 0; len(backendsOf(t, td).Instances) > 0; i++ {
		if i > 1000 {
			t.Fatalf("instances %+v still there after their job timed out", backendsOf(t, td).Instances)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
