package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/testtmp"
	"github.com/wsched/wsched/internal/units"
)

// TestMain lets the test binary act as the wsched binary in subprocesses
// (WSCHED_TEST_AS_MAIN=1), so end-to-end tests exec real processes without
// a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("WSCHED_TEST_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(testtmp.Main(m))
}

const GiB = units.GiB

// e2e is a temp dir with a config for one 24 GiB simulated GPU.
type e2e struct {
	t      *testing.T
	dir    string
	config string
	socket string
	tmp    string
}

func newE2E(t *testing.T) *e2e {
	t.Helper()
	dir := t.TempDir()
	// The socket lives in the short directory: a subtest's TempDir can be
	// too long for a Unix socket path (107 bytes).
	short := testtmp.ShortDir(t)
	e := &e2e{t: t, dir: dir, config: filepath.Join(dir, "wsched.toml"), socket: filepath.Join(short, "wsched.sock"), tmp: short}
	cfg := fmt.Sprintf(`[daemon]
socket = %q
state_dir = %q
[inventory]
provider = "sim"
refresh_interval = "100ms"
[placement]
reserved = "0B"
safety_factor = 1.0
[[inventory.sim]]
name = "Sim 24GB"
memory = "24GiB"
`, e.socket, filepath.Join(dir, "state"))
	if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// wsched returns a command running this test binary as wsched.
func (e *e2e) wsched(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	// TMPDIR of the test: tests kill daemons with SIGKILL, which leaves
	// their backends' socket directories behind.
	cmd.Env = append(os.Environ(), "WSCHED_TEST_AS_MAIN=1", "WSCHED_CONFIG="+e.config, "TMPDIR="+e.tmp)
	return cmd
}

// serve starts a daemon subprocess and waits until it answers.
func (e *e2e) serve() *exec.Cmd {
	e.t.Helper()
	cmd := e.wsched("serve")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // also waits for the log copier
		if e.t.Failed() {
			e.t.Logf("daemon log:\n%s", logs.String())
		}
	})
	e.waitHealthy()
	return cmd
}

func (e *e2e) client() *client.Client { return client.New(e.socket) }

func (e *e2e) waitHealthy() {
	e.t.Helper()
	c := e.client()
	defer c.Close()
	testshared.WaitHealthy(e.t, c)
}

func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "120")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// TestDaemonKilledAndRestarted: kill -9 of the daemon, then a restart:
// live holders' leases come back, dead holders' leases are released, and
// no byte is granted twice.
func TestDaemonKilledAndRestarted(t *testing.T) {
	e := newE2E(t)
	daemon := e.serve()
	ctx := context.Background()
	c := e.client()
	alive, dying := sleeper(t), sleeper(t)
	la, err := c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 20 * GiB, TTLSeconds: 3600, Holder: &api.HolderRequest{PID: alive.Process.Pid}})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 2 * GiB, TTLSeconds: 3600, Holder: &api.HolderRequest{PID: dying.Process.Pid}})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	_ = daemon.Process.Signal(syscall.SIGKILL)
	_ = daemon.Wait()
	_ = dying.Process.Kill()
	_ = dying.Wait()

	e.serve()
	c = e.client()
	defer c.Close()
	if got, err := c.Lease(ctx, la.ID); err != nil || got.State != "granted" || got.MemoryBytes != 20*GiB {
		t.Fatalf("live holder's lease after restart: %+v %v", got, err)
	}
	if _, err := c.Lease(ctx, lb.ID); !client.IsCode(err, "not_found") {
		t.Errorf("dead holder's lease after restart: %v, want not_found", err)
	}
	// 24 GiB − 20 GiB restored: 5 GiB must not fit (no byte granted twice),
	// 4 GiB must (the dead holder's 2 GiB came back).
	if _, err := c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 5 * GiB}); !client.IsCode(err, "no_fit") {
		t.Errorf("5 GiB after restart: %v, want no_fit", err)
	}
	l4, err := c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 4 * GiB})
	if err != nil {
		t.Errorf("4 GiB after restart: %v", err)
	}
	// The restored holder is watched again: its death releases its lease.
	_ = alive.Process.Kill()
	_ = alive.Wait()
	for i := 0; ; i++ {
		got, _ := c.Lease(ctx, la.ID)
		if got.State == "released" {
			break
		}
		if i > 500 {
			t.Fatalf("restored lease not released after its holder died: %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, _ = c.Release(ctx, l4.ID)
}

// TestRunExitStatus is the example: the child sees its lease's GPU
// as cuda:0, wsched exits with the child's status, and the lease is gone.
func TestRunExitStatus(t *testing.T) {
	e := newE2E(t)
	e.serve()
	cmd := e.wsched("run", "--", "sh", "-c", `echo $CUDA_VISIBLE_DEVICES $SENSEVOICE_DEVICE; exit 3`)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("wsched run: %v, want exit status 3\nstderr: %s", err, stderr.String())
	}
	c := e.client()
	defer c.Close()
	g, err := c.GPUs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := g.GPUs[0].UUID + " cuda:0\n"; stdout.String() != want {
		t.Errorf("child printed %q, want %q", stdout.String(), want)
	}
	id := regexp.MustCompile(`lease (l-[0-9a-f]+) granted`).FindStringSubmatch(stderr.String())
	if id == nil {
		t.Fatalf("no lease in stderr: %s", stderr.String())
	}
	l, err := c.Lease(context.Background(), id[1])
	if err != nil || l.State != "released" {
		t.Errorf("lease after the child exited: %+v %v", l, err)
	}
	if ls, _ := c.Leases(context.Background()); len(ls) != 0 {
		t.Errorf("leases left: %+v", ls)
	}
}

// TestRunSignalAndFallback: a child killed by a signal gives 128+signal;
// without a daemon, --fallback=local places by a local reading.
func TestRunSignalAndFallback(t *testing.T) {
	e := newE2E(t)
	cmd := e.wsched("run", "--fallback=local", "--", "sh", "-c", `echo $SENSEVOICE_DEVICE; kill -TERM $$`)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Errorf("exit: %v, want %d", err, 128+int(syscall.SIGTERM))
	}
	if stdout.String() != "cuda:0\n" || !strings.Contains(stderr.String(), "no lease; placed by a local reading on GPU 0") {
		t.Errorf("fallback: stdout %q stderr %q", stdout.String(), stderr.String())
	}
	plain := e.wsched("run", "--", "true")
	out, err := plain.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "wsched daemon unreachable at "+e.socket) || !strings.Contains(string(out), "systemctl start wsched") {
		t.Errorf("unreachable daemon: %v %s", err, out)
	}
}

// TestSocketActivation starts the daemon the way systemd does: on the first
// connection to a socket systemd-socket-activate holds, and checks that it
// answers and reports READY=1 on NOTIFY_SOCKET.
func TestSocketActivation(t *testing.T) {
	tool, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("systemd-socket-activate not installed (make deps installs Debian's systemd package)")
	}
	e := newE2E(t)
	notifyPath := filepath.Join(e.dir, "notify.sock")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	cmd := exec.Command(tool, "-l", e.socket, "--fdname=wsched.socket",
		"-E", "WSCHED_TEST_AS_MAIN=1", "-E", "WSCHED_CONFIG="+e.config, "-E", "NOTIFY_SOCKET="+notifyPath,
		os.Args[0], "serve")
	var logs testshared.SyncBuffer // written by the process while the test reads it
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	c := e.client()
	defer c.Close()
	// The socket exists before the daemon does, and is bound a moment before
	// it listens: retry while nothing listens yet. The first connection that
	// is accepted starts the daemon.
	var st api.Status
	for i := 0; ; i++ {
		if st, err = c.Status(context.Background()); err == nil || !notListening(err) || i > 500 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("status over the activated socket: %v\n%s", err, logs.String())
	}
	if !st.SocketActivated || st.GPUs != 1 {
		t.Errorf("status: %+v", st)
	}
	_ = notify.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, _, err := notify.ReadFromUnix(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "READY=1") {
		t.Errorf("sd_notify: %q %v", buf[:n], err)
	}
}

// notListening reports whether a connection failed because nothing listens
// on the socket (yet): it does not exist, or is bound but not listening.
func notListening(err error) bool { return errors.Is(err, client.ErrUnreachable) }
