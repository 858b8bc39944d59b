package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/plugins/plugintest"
)

// TestOOMWaitsForMemory (issue 13): a model entry whose memory (512 MiB)
// is too small for a backend that needs a 3 GiB lease, on a GPU an outside
// lease has filled but for 1 GiB. The first attempt runs out of memory; the second
// asks for the reported buffers plus the CUDA context (not 1.5 × 512 MiB),
// waits in the placement queue without burning attempts, and completes once
// the outside lease is released.
func TestOOMWaitsForMemory(t *testing.T) {
	t.Setenv(plugintest.Env(plugintest.Memory), fmt.Sprintf("total=%d", 3*GiB))
	t.Setenv(plugintest.Env(plugintest.OOMBelow), fmt.Sprint(3*GiB))
	td, audio := jobDaemon(t, GiB/2, nil)
	// Leave 1 GiB: room for the first attempt, not for the second.
	fill := td.d.eng.View().GPUs[0].AvailableOrZero() - GiB
	status, body := td.raw("POST", "/v1/leases", fmt.Sprintf(`{"memory_bytes": %d}`, fill))
	if status != http.StatusCreated && status != http.StatusOK {
		t.Fatalf("outside lease: %d %s", status, body)
	}
	var outside struct{ ID string }
	_ = json.Unmarshal([]byte(body), &outside)

	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	// The second attempt waits in the engine's queue for its memory.
	deadline := time.Now().Add(time.Minute)
	for len(td.d.eng.View().Queue) == 0 {
		if got := td.job(t, j.ID); got.State.Finished() || time.Now().After(deadline) {
			t.Fatalf("the retry never waited in the queue: %+v", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	queued := td.d.eng.View().Queue[0]
	if queued.Bytes < 3*GiB {
		t.Errorf("the retry asks for %d bytes, want ≥ reported 3 GiB + context", queued.Bytes)
	}
	// Waiting is not an attempt: the count stays at the one that ran out.
	if got := td.job(t, j.ID); got.Attempts != 1 || got.RetryBytes != queued.Bytes {
		t.Errorf("while waiting: attempts %d (want 1), retry_bytes %d (queued %d)", got.Attempts, got.RetryBytes, queued.Bytes)
	}
	if status, out := td.raw("DELETE", "/v1/leases/"+outside.ID, ""); status != http.StatusOK && status != http.StatusNoContent {
		t.Fatalf("release the outside lease: %d %s", status, out)
	}
	got := td.waitJob(t, j.ID, finished)
	if got.State != jobs.Completed || got.Attempts != 2 {
		t.Fatalf("job: %s after %d attempts, error %q", got.State, got.Attempts, got.Error)
	}
}
