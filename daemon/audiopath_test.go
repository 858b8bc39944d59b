package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

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
