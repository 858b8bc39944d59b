package daemon

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestJobMetrics runs a job and reads its metrics on /metrics; the whole
// exposition passes `promtool check metrics` where promtool is installed.
func TestJobMetrics(t *testing.T) {
	td, audio := jobDaemon(t, 4*GiB, nil)
	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	td.waitJob(t, j.ID, finished)
	want := []string{
		`wsched_gpu_placeable{gpu="0",name="Sim GPU",reason="",uuid=`,
		`wsched_jobs{state="completed"} 1`, `wsched_jobs{state="pending"} 0`,
		`wsched_job_attempts_total{backend="fake",model="fake-tiny",outcome="completed"} 1`,
		`wsched_job_queue_wait_seconds_count{backend="fake",model="fake-tiny"} 1`,
		`wsched_job_processing_seconds_count{backend="fake",model="fake-tiny"} 1`,
		`wsched_job_real_time_factor_ratio_count{backend="fake",model="fake-tiny"} 1`,
	}
	var body string
	for i := 0; ; i++ { // the metrics follow the job's events asynchronously
		_, body = td.raw("GET", "/metrics", "")
		if containsAll(body, want) {
			break
		}
		if i > 2000 {
			for _, w := range want {
				if !strings.Contains(body, w) {
					t.Errorf("metrics lack %s", w)
				}
			}
			t.FailNow()
		}
		time.Sleep(5 * time.Millisecond)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not found (make deps installs Debian's prometheus): not checking metric names")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
