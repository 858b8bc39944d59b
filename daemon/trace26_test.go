package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/internal/asuser"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/jobs"
)

// TestTraceHidesOtherUsers: GET /v1/jobs/trace as uid nobody has none of
// root's jobs and no labels of root's leases (their events are there);
// root's own trace has both.
func TestTraceHidesOtherUsers(t *testing.T) {
	plugins := fakeBackendDir(t)
	models := t.TempDir()
	model := filepath.Join(models, "fake-tiny.bin")
	_ = os.WriteFile(model, []byte("model"), 0o644)
	td, dir := asNobody(t, func(c *config.Config) {
		c.Backends.PluginDir, c.Backends.DevDirs = plugins, nil
		c.Models.Dir = filepath.Join(models, "models")
		c.Models.Entries = []config.Model{{Name: "fake-tiny", Backend: "fake", Path: model, Memory: units.Bytes(GiB)}}
		c.Models.Default = "fake-tiny"
	})
	audio := filepath.Join(dir, "a.wav")
	writeTone(t, audio, 1)
	_ = os.Chmod(audio, 0o644)
	j := td.waitJob(t, td.submit(t, fmt.Sprintf(`{"audio_path": %q}`, audio)).ID, finished)
	_, mine := td.raw("GET", "/v1/jobs/trace", "")
	if j.State != jobs.Completed || !strings.Contains(mine, `"id":"`+j.ID) || !strings.Contains(mine, `"job":"`+j.ID) || !strings.HasPrefix(mine, `{"kind":"trace"`) {
		t.Errorf("root's trace lacks its job or its lease's label (job %s):\n%s", j.State, mine)
	}
	out, err := asuser.Command(context.Background(), t, dir, "get", td.socket, "/v1/jobs/trace").CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	trace := string(out)
	if strings.Contains(trace, j.ID) || !strings.Contains(trace, `"jobs":0`) || !strings.Contains(trace, `"event":"granted"`) {
		t.Errorf("uid %d's trace shows root's job or labels, or no lease events:\n%s", asuser.Nobody, trace)
	}
}
