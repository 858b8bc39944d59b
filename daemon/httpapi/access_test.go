package httpapi

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// openAsNobody resolves, opens and checks path as uid 65534 would, the
// way snapshotAudio does for a client.
func openAsNobody(path string) error {
	f, err := asCreds(creds{UID: 65534, GID: 65534, Groups: []int{65534}}, func() (*os.File, error) { return resolveAndOpen(path) })
	if err != nil {
		return err
	}
	defer f.Close()
	return checkAudioFile(f, path)
}

// TestOpenWithClientCredentials: the kernel checks the client's access —
// ACLs included — on a thread that takes its fsuid, fsgid and groups; the
// daemon's own credentials are intact afterwards on every thread.
func TestOpenWithClientCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("taking another uid's file-system credentials needs root")
	}
	dir := t.TempDir()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755)
	}
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("RIFF"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open, private := write("open.wav", 0o644), write("private.wav", 0o600)
	closed := filepath.Join(dir, "closed")
	_ = os.Mkdir(closed, 0o700)
	inClosed := filepath.Join(closed, "a.wav")
	_ = os.WriteFile(inClosed, []byte("RIFF"), 0o644)
	link := filepath.Join(dir, "maps.wav")
	_ = os.Symlink("/proc/self/maps", link)
	fifo := filepath.Join(dir, "fifo.wav")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path   string
		status int // 0 = allowed
		want   string
	}{
		{open, 0, ""},
		{private, http.StatusForbidden, "may not read"},
		{inClosed, http.StatusForbidden, "may not read"},
		{"/proc/self/maps", http.StatusBadRequest, "under /proc"},
		{link, http.StatusBadRequest, "under /proc"},
		{"/sys", http.StatusBadRequest, "under /sys"},
		{"/dev/null", http.StatusBadRequest, "under /dev"},
		{fifo, http.StatusBadRequest, "not a regular file"},
		{filepath.Join(dir, "missing.wav"), http.StatusBadRequest, "no such file"},
	}
	if denied, ok := aclDenied(t, dir); ok {
		tests = append(tests, struct {
			path   string
			status int
			want   string
		}{denied, http.StatusForbidden, "may not read"})
	}
	for _, tt := range tests {
		err := openAsNobody(tt.path)
		var he *httpError
		switch {
		case tt.status == 0 && err != nil:
			t.Errorf("%s as nobody: %v, want allowed", tt.path, err)
		case tt.status != 0 && (!errors.As(err, &he) || he.status != tt.status || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s as nobody: %v, want %d %q", tt.path, err, tt.status, tt.want)
		}
	}
	// The daemon's threads are still root: many goroutines read the private file.
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if _, err := os.ReadFile(private); err != nil {
				t.Errorf("the daemon lost its credentials: %v", err)
			}
		})
	}
	wg.Wait()
}

// aclDenied makes a 0644 file whose POSIX ACL denies uid 65534, or says
// why it cannot.
func aclDenied(t *testing.T, dir string) (string, bool) {
	p := filepath.Join(dir, "acl.wav")
	if err := os.WriteFile(p, []byte("RIFF"), 0o644); err != nil {
		t.Fatal(err)
	}
	setfacl, err := exec.LookPath("setfacl")
	if err != nil {
		t.Log("setfacl is missing (Debian package acl, `make deps`): the ACL case is not tested")
		return "", false
	}
	if out, err := exec.Command(setfacl, "-m", "u:65534:---", p).CombinedOutput(); err != nil {
		t.Logf("setfacl on %s: %v: %s: the ACL case is not tested", dir, err, out)
		return "", false
	}
	if st, _ := os.Stat(p); st.Mode().Perm()&0o004 == 0 {
		t.Fatalf("%s: mode %v, want others to read it by mode bits", p, st.Mode())
	}
	return p, true
}
