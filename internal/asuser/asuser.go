// Package asuser lets a test run part of itself as an unprivileged user
// (nobody, uid 65534) in a subprocess, so that per-uid behaviour is tested
// with real kernel credentials (SO_PEERCRED, file permissions) rather than
// a seam. It needs root; tests skip otherwise.
package asuser

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsched/wsched/internal/testtmp"
)

// Nobody is the uid and gid the subprocess runs as.
const Nobody = 65534

// helperEnv names the helper a re-executed test binary runs.
const helperEnv = "WSCHED_ASUSER_HELPER"

// Helper returns the helper name when this process was started by Command
// (call it first thing in TestMain), else "".
func Helper() string { return os.Getenv(helperEnv) }

// Dir is a short directory (for Unix sockets) that nobody can enter: it and
// its ancestors get o+x (search, not list) where they lack it. The
// ancestors keep it: test packages run in parallel under one TMPDIR, and
// restoring it while another package's helper runs would lock that one out.
func Dir(t testing.TB) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("running a client as another uid needs root")
	}
	dir := testtmp.ShortDir(t)
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if mode := st.Mode().Perm(); mode&0o001 == 0 {
			if !strings.HasPrefix(d, "/tmp/") && !strings.HasPrefix(d, "/var/tmp/") {
				t.Skipf("uid %d cannot enter %s, and it is not a temporary directory to open up", Nobody, d)
			}
			if err := os.Chmod(d, mode|0o001); err != nil {
				t.Fatal(err)
			}
		}
		if d == "/" || d == "." {
			break
		}
	}
	return dir
}

// Command runs this test binary again as nobody, in dir (from Dir), with
// helper named in its environment; TestMain dispatches on Helper().
func Command(ctx context.Context, t testing.TB, dir, helper string, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "asuser.test")
	if _, err := os.Stat(bin); err != nil {
		if err := copyFile(self, bin); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), helperEnv+"="+helper)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: Nobody, Gid: Nobody}}
	return cmd
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
