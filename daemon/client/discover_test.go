package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/internal/asuser"
	"github.com/wsched/wsched/internal/testtmp"
)

// healthyDaemon serves /healthz on a Unix socket at path.
func healthyDaemon(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
}

// TestDiscoverFallsBackToSecondSocket: the per-user socket is missing, the
// system one answers; the client uses and names the second from then on.
func TestDiscoverFallsBackToSecondSocket(t *testing.T) {
	dir := testtmp.ShortDir(t)
	user, system := filepath.Join(dir, "user.sock"), filepath.Join(dir, "system.sock")
	healthyDaemon(t, system)
	c := Discover("wsched", user, system)
	defer c.Close()
	if got := c.Socket(); got != user {
		t.Errorf("Socket() before the first connection = %s, want the first candidate %s", got, user)
	}
	if err := c.Health(context.Background()); err != nil {
		t.Fatalf("Health: %v", err)
	}
	if got := c.Socket(); got != system {
		t.Errorf("Socket() = %s, want %s", got, system)
	}
	healthyDaemon(t, user) // found once: the client stays with the system socket
	if err := c.Health(context.Background()); err != nil || c.Socket() != system {
		t.Errorf("second Health: %v on %s, want nil on %s", err, c.Socket(), system)
	}
}

// TestDiscoverPrefersFirstSocket: with both answering, the per-user daemon wins.
func TestDiscoverPrefersFirstSocket(t *testing.T) {
	dir := testtmp.ShortDir(t)
	user, system := filepath.Join(dir, "user.sock"), filepath.Join(dir, "system.sock")
	healthyDaemon(t, user)
	healthyDaemon(t, system)
	c := Discover("wsched", user, system)
	defer c.Close()
	if err := c.Health(context.Background()); err != nil || c.Socket() != user {
		t.Errorf("Health: %v on %s, want nil on %s", err, c.Socket(), user)
	}
}

// TestDiscoverNamesEveryPath: no daemon anywhere; the error lists both paths
// with their reasons and names the group to join.
func TestDiscoverNamesEveryPath(t *testing.T) {
	dir := testtmp.ShortDir(t)
	user, system := filepath.Join(dir, "user.sock"), filepath.Join(dir, "system.sock")
	ln, err := net.Listen("unix", system)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the file stays, nobody listens: connection refused
	c := Discover("", user, system)
	defer c.Close()
	err = c.Health(context.Background())
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Health: %v, want ErrUnreachable", err)
	}
	for _, want := range []string{user + " (no such file or directory)", system + " (connection refused)", "join group wsched"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v does not unwrap to os.ErrNotExist", err)
	}
}

// TestDiscoverPermissionDenied: as nobody, the system socket is a 0660 root
// socket; the error names both paths and says to join the group.
func TestDiscoverPermissionDenied(t *testing.T) {
	dir := asuser.Dir(t)
	user, system := filepath.Join(dir, "user.sock"), filepath.Join(dir, "system.sock")
	ln, err := net.Listen("unix", system)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(system, 0o660); err != nil {
		t.Fatal(err)
	}
	out, err := asuser.Command(context.Background(), t, dir, "discover", user, system).CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	for _, want := range []string{user + " (no such file or directory)", system + " (permission denied)", "join group wsched"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("uid %d: %s; want %q", asuser.Nobody, out, want)
		}
	}
}
