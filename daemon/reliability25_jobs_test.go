package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/plugins/plugintest"
)

// relIssue25Jobs adds the rows of issue 25 for the job table, NaN/Inf and result bounds (items 10, 14, 16).
func relIssue25Jobs(rec *relRecorder) {
	rec.pair("token fills job table", "token's 100 jobs (table 100), then root's", relJobTable,
		func(b, a string) bool {
			return strings.HasSuffix(b, "root 503") && strings.HasPrefix(a, "10 of 100") && strings.HasSuffix(a, "root 202")
		})
	rec.single("60 jobs at once, one uid", "admitted against [limits] active_jobs = 32", "issue: 60 of 60", relJobBurst)
	rec.single("DELETE a finished job", "answer, then GET", "issue: 409 job_finished", relDeleteFinished)
	rec.single("backend reports NaN progress", "GET /v1/jobs, monitor, after a restart", "issue: 200 empty body, stream died, not persisted", relNaNProgress)
	rec.single("vad_threshold=NaN in a form", "answer", "issue: 500", relNaNForm)
	rec.pair("150k segments", "job; heap the job keeps (freed by DELETE); GET", relSegments,
		func(b, a string) bool {
			return strings.HasPrefix(b, "completed") && strings.HasPrefix(a, "failed ([jobs] max_segments)")
		})
}

// protectionOff reports whether mod is the "before" run: it turns [limits]
// off (unprotected), which the job rows take as their own keys off too.
func protectionOff(mod func(*config.Config)) bool {
	c := config.Defaults()
	mod(c)
	return c.Limits == config.Limits{}
}

// tcpUpload submits a one-second fake audio file over TCP with the token
// and returns the answer's status.
func tcpUpload(t *testing.T, td *testDaemon) int {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "a.wav")
	_, _ = fw.Write([]byte("RIFF fake audio"))
	_ = mw.Close()
	req, _ := http.NewRequest("POST", "http://"+td.d.tcpAddr+"/v1/jobs", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// relJobTable: the token holder submits 100 jobs into a table of 100 (the
// 10,000 of the defaults scaled by 1/100, and token_stored_jobs with it:
// 1000 → 10); then root submits one.
func relJobTable(t *testing.T, mod func(*config.Config)) (string, bool) {
	off := protectionOff(mod)
	td, audio := jobDaemon(t, 4*GiB, func(c *config.Config) {
		mod(c)
		c.Daemon.HTTPListen, c.Daemon.HTTPToken = "127.0.0.1:0", testToken
		c.Jobs.MaxJobs = 100
		if !off {
			c.Limits.TokenStoredJobs = 10
		}
	})
	counts := map[int]int{}
	for range 100 {
		counts[tcpUpload(t, td)]++
	}
	status, _ := td.raw("POST", "/v1/jobs", fmt.Sprintf(`{"audio_path": %q}`, audio))
	return fmt.Sprintf("%d of 100 accepted (%d × 429); root %d", counts[http.StatusAccepted], counts[http.StatusTooManyRequests], status), true
}

// relJobBurst: uid nobody posts 60 jobs at once while a root lease fills
// the GPU (so none finishes); [limits] active_jobs is 32.
func relJobBurst(t *testing.T) (string, bool) {
	plugins := fakeBackendDir(t)
	td, dir := asNobody(t, func(c *config.Config) {
		c.Backends.PluginDir, c.Backends.DevDirs = plugins, nil
		c.Models.Entries = []config.Model{{Name: "fake-tiny", Backend: "fake", Path: "/dev/null", Memory: units.Bytes(GiB)}}
		c.Models.Default = "fake-tiny"
	})
	if _, err := td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: 8 * GiB}); err != nil {
		t.Fatal(err)
	}
	audio := filepath.Join(dir, "a.wav")
	if err := os.WriteFile(audio, []byte("RIFF fake audio"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runAsNobody(t, dir, td.socket, "/v1/jobs", 60, fmt.Sprintf(`{"audio_path": %q}`, audio), true)
	admitted, refused := strings.Count(got, "202/"), strings.Count(got, "429/limit_exceeded")
	return fmt.Sprintf("%d of 60 (%d refused 429)", admitted, refused), admitted == 32 && refused == 28
}

// relDeleteFinished: DELETE of a completed job, then GET; DELETE of a
// running one cancels it.
func relDeleteFinished(t *testing.T) (string, bool) {
	t.Setenv(plugintest.Env(plugintest.Block), "transcribe")
	td, audio := jobDaemon(t, 4*GiB, nil)
	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	td.waitJob(t, j.ID, func(j jobs.Job) bool { return j.State == jobs.Processing })
	cancelStatus, cancelBody := td.raw("DELETE", "/v1/jobs/"+j.ID, "")
	var cancelled struct {
		State   jobs.State `json:"state"`
		Deleted bool       `json:"deleted"`
	}
	_ = json.Unmarshal([]byte(cancelBody), &cancelled)
	delStatus, delBody := td.raw("DELETE", "/v1/jobs/"+j.ID, "")
	var deleted struct {
		Deleted bool `json:"deleted"`
	}
	_ = json.Unmarshal([]byte(delBody), &deleted)
	getStatus, _ := td.raw("GET", "/v1/jobs/"+j.ID, "")
	fig := fmt.Sprintf("running: %d %s; finished: %d deleted=%v; GET %d", cancelStatus, cancelled.State, delStatus, deleted.Deleted, getStatus)
	return fig, cancelStatus == 200 && cancelled.State == jobs.Cancelled && !cancelled.Deleted && delStatus == 200 && deleted.Deleted && getStatus == 404
}

// relNaNProgress: the backend reports progress NaN; the job list, a
// monitor stream opened before, and the job after a restart.
func relNaNProgress(t *testing.T) (string, bool) {
	t.Setenv(plugintest.Env(plugintest.Progress), "NaN")
	t.Setenv(plugintest.Env(plugintest.SegmentDelay), "100ms") // processing for 300 ms, after the NaN
	td, audio := jobDaemon(t, 4*GiB, nil)
	resp, err := sseGet(td, "/v1/monitor/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	gets, broken := 0, 0 // GET /v1/jobs while it runs
	for cur := td.job(t, j.ID); !cur.State.Finished(); cur = td.job(t, j.ID) {
		status, body := td.raw("GET", "/v1/jobs", "")
		var list struct{ Jobs []jobs.Job }
		if gets++; status != 200 || json.Unmarshal([]byte(body), &list) != nil {
			broken++
		}
		time.Sleep(5 * time.Millisecond)
	}
	saw := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), j.ID) && strings.Contains(sc.Text(), `"completed"`) {
				saw <- true
				return
			}
		}
		saw <- false
	}()
	monitor := "monitor stream ended"
	select {
	case ok := <-saw:
		if ok {
			monitor = "monitor saw it complete"
		}
	case <-time.After(10 * time.Second):
		monitor = "monitor silent 10 s"
	}
	status, body := td.raw("GET", "/v1/jobs", "")
	var list struct{ Jobs []jobs.Job }
	parsed := json.Unmarshal([]byte(body), &list) == nil && len(list.Jobs) == 1
	td.stop()
	td2 := runDaemon(t, td.cfg)
	after := td2.job(t, j.ID)
	fig := fmt.Sprintf("%d of %d GETs broken while it ran, after: %d parses=%v; %s; after restart %s %.0f%%",
		broken, gets, status, parsed, monitor, after.State, after.Progress)
	return fig, broken == 0 && status == 200 && parsed && monitor == "monitor saw it complete" && after.State == jobs.Completed && after.Progress == 100
}

// relNaNForm: an upload form with vad_threshold=NaN.
func relNaNForm(t *testing.T) (string, bool) {
	td, audio := jobDaemon(t, 4*GiB, nil)
	status, _, body := postMultipart(t, td, "/v1/jobs", audio, map[string]string{"vad_threshold": "NaN"})
	named := strings.Contains(body, "vad_threshold")
	return fmt.Sprintf("%d, names vad_threshold=%v", status, named), status == http.StatusBadRequest && named
}

// heapInUse is the live heap after two collections (the second empties
// the sync.Pools, e.g. encoding/json's buffers, the first moved aside).
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// relSegments: a backend returns 150,000 segments (the defaults bound
// 100,000): the job's end, the heap it keeps (what deleting it frees, in
// this process, which is the daemon's), and the size of GET /v1/jobs/ID.
func relSegments(t *testing.T, mod func(*config.Config)) (string, bool) {
	off := protectionOff(mod)
	t.Setenv(plugintest.Env(plugintest.Segments), "150000")
	td, audio := jobDaemon(t, 4*GiB, func(c *config.Config) {
		mod(c)
		c.Jobs.Timeout = config.Defaults().Jobs.Timeout
		if off {
			c.Jobs.MaxSegments, c.Jobs.MaxResultBytes = 0, 0
		}
	})
	j := td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	done, err := td.d.jobs.Wait(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	state, failure := string(done.State), done.Error
	done = jobs.Job{} // this copy of the result is not the daemon's
	_, body := td.raw("GET", "/v1/jobs/"+j.ID, "")
	got := len(body)
	body = ""
	withJob := heapInUse()
	if status, out := td.raw("DELETE", "/v1/jobs/"+j.ID, ""); status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", status, out)
	}
	after := heapInUse()
	t.Logf("heap with the job %d, after DELETE %d", withJob, after)
	kept := int64(withJob) - int64(after) // what deleting the job freed
	if strings.Contains(failure, "[jobs] max_segments") {
		state += " ([jobs] max_segments)"
	}
	return fmt.Sprintf("%s; job holds %s of heap; GET %s", state, units.FormatBytes(max(kept, 0)), units.FormatBytes(int64(got))), true
}

// The rows above as tests of the shipped defaults (they fail on a daemon
// without the fixes of issue 25 items 10, 14 and 16).

func TestJobTableTokenLimit(t *testing.T) {
	if fig, _ := relJobTable(t, shipped); !strings.HasPrefix(fig, "10 of 100") || !strings.HasSuffix(fig, "root 202") {
		t.Errorf("token fills the table: %s", fig)
	}
}

func TestDeleteFinishedJob(t *testing.T) {
	if fig, ok := relDeleteFinished(t); !ok {
		t.Error(fig)
	}
}

func TestNaNProgressFromBackend(t *testing.T) {
	if fig, ok := relNaNProgress(t); !ok {
		t.Error(fig)
	}
}

func TestNaNInForm(t *testing.T) {
	if fig, ok := relNaNForm(t); !ok {
		t.Error(fig)
	}
}

func TestResultBounded(t *testing.T) {
	if fig, _ := relSegments(t, shipped); !strings.HasPrefix(fig, "failed ([jobs] max_segments)") {
		t.Errorf("150k segments: %s", fig)
	}
}

func TestJobBurstOneUID(t *testing.T) {
	if fig, ok := relJobBurst(t); !ok {
		t.Error(fig)
	}
}
