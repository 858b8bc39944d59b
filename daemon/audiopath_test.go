package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/asuser"
)

// TestAudioPathAsClient: audio named by path is opened with the client's
// credentials, so a file whose ACL or mode denies the client is refused
// (403) though the daemon runs as root, and kernel files (/proc/self/maps
// of the daemon) are refused whoever asks (400).
func TestAudioPathAsClient(t *testing.T) {
	td, dir := asNobody(t, nil)
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("RIFF not really a wav"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct{ name, path, want string }{
		{"readable", write("ok.wav", 0o644), "202/"},
		{"root's 0600", write("private.wav", 0o600), "403/forbidden"},
		{"daemon's maps", "/proc/self/maps", "400/invalid_field"},
		{"device", "/dev/zero", "400/invalid_field"},
	}
	acl := write("acl.wav", 0o644)
	if setfacl, err := exec.LookPath("setfacl"); err != nil {
		t.Log("setfacl is missing (Debian package acl, `make deps`): the ACL case is not tested")
	} else if out, err := exec.Command(setfacl, "-m", "u:65534:---", acl).CombinedOutput(); err != nil {
		t.Logf("setfacl: %v: %s: the ACL case is not tested", err, out)
	} else {
		tests = append(tests, struct{ name, path, want string }{"ACL denies", acl, "403/forbidden"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"audio_path": %q}`, tt.path)
			if got := runAsNobody(t, dir, td.socket, "/v1/jobs", 1, body, false); got != tt.want {
				t.Errorf("uid %d submits %s: %s, want %s", asuser.Nobody, tt.path, got, tt.want)
			}
		})
	}
	// Root may read its own files, but not the daemon's kernel files either.
	if status, out := td.raw("POST", "/v1/jobs", `{"audio_path": "/proc/self/maps"}`); status != 400 {
		t.Errorf("root submits /proc/self/maps: %d %s, want 400", status, out)
	}
}

// TestAudioPassedAsDescriptor: `wsched transcribe` passes the file it
// opened (SCM_RIGHTS); the daemon copies it from its start into the spool,
// refuses kernel files passed this way too, and a request that announces a
// descriptor without sending one.
func TestAudioPassedAsDescriptor(t *testing.T) {
	td, _ := jobDaemon(t, 10*GiB, nil)
	ctx := context.Background()
	if _, err := td.c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 20 * GiB}); err != nil {
		t.Fatal(err) // the job waits for memory while we look at its audio
	}
	path := filepath.Join(t.TempDir(), "passed.wav")
	if err := os.WriteFile(path, []byte("RIFF-passed"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := td.c.PassJob(ctx, path, api.JobRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(j.Spec.AudioPath)
	if err != nil || string(got) != "RIFF-passed" || !j.Spec.Uploaded || filepath.Ext(j.Spec.AudioPath) != ".wav" {
		t.Errorf("job audio %q (uploaded %v) holds %q, %v; want a .wav copy of the passed file", j.Spec.AudioPath, j.Spec.Uploaded, got, err)
	}
	if _, err := td.c.PassJob(ctx, "/proc/self/maps", api.JobRequest{}); !client.IsCode(err, "invalid_field") {
		t.Errorf("passing /proc/self/maps: %v, want invalid_field", err)
	}
	req, _ := http.NewRequest("POST", "http://wsched/v1/jobs", strings.NewReader(`{}`))
	req.Header.Set(api.AudioFDHeader, "a.wav")
	resp, err := unixHTTP(td.socket).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "got 0") {
		t.Errorf("%s without a descriptor: %d %s", api.AudioFDHeader, resp.StatusCode, body)
	}
}
