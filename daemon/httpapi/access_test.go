package httpapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadableBy(t *testing.T) {
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	open := filepath.Join(dir, "open.wav")
	private := filepath.Join(dir, "private.wav")
	_ = os.WriteFile(open, []byte("x"), 0o644)
	_ = os.WriteFile(private, []byte("x"), 0o600)
	closed := filepath.Join(dir, "closed")
	_ = os.Mkdir(closed, 0o700)
	inClosed := filepath.Join(closed, "a.wav")
	_ = os.WriteFile(inClosed, []byte("x"), 0o644)
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755)
	}
	nobody := Peer{PID: os.Getpid(), UID: 65534, GID: 65534, Known: true}
	tests := []struct {
		peer Peer
		path string
		want string // "" = allowed
	}{
		{nobody, open, ""},
		{nobody, private, "may not read it"},
		{nobody, inClosed, "may not enter"},
		{Peer{UID: 0, Known: true}, private, ""},
		{nobody, "relative.wav", "not an absolute path"},
		{nobody, filepath.Join(dir, "missing.wav"), "no such file"},
		{nobody, dir, "not a regular file"},
	}
	for _, tt := range tests {
		err := readableBy("/proc", tt.peer, tt.path)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("readableBy(uid %d, %s) = %v, want %q", tt.peer.UID, tt.path, err, tt.want)
		}
	}
}
