package host

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/wsched/wsched/internal/cgroup"
	"github.com/wsched/wsched/plugins"
)

// process is one running backend subprocess behind its go-plugin client.
type process struct {
	client  *plugin.Client
	backend plugins.Backend
	pid     int
	extra   []int  // processes the backend ran (Info.PIDs), counted against the lease
	sockDir string // the backend's socket directory, removed with the process
	cg      *cgroup.Group
	log     *slog.Logger
}

// startProcess runs the backend at path with exactly env as its
// environment, completes go-plugin's handshake (AutoMTLS) and dispenses the
// Backend. Its logs go to log. ctx ends the start-up, not the process.
//
// The backend makes its go-plugin socket in a directory of its own, which kill
// removes: no socket is left behind in $TMPDIR, not even by a backend that
// was killed with SIGKILL.
//
// With cg the process starts in that cgroup (or is moved there at once), and
// kill kills and removes the cgroup: nothing the backend started survives it.
func startProcess(ctx context.Context, path string, env []string, log *slog.Logger, timeout time.Duration, cg *cgroup.Group) (*process, error) {
	sockDir, err := os.MkdirTemp("", "wsched-be-")
	if err != nil {
		return nil, fmt.Errorf("start %s: socket directory: %w", path, err)
	}
	// go-plugin names the socket "plugin" + 10 digits; sun_path holds 107 bytes.
	if n := len(sockDir) + len("/plugin0123456789"); n > 107 {
		_ = os.Remove(sockDir)
		return nil, fmt.Errorf("start %s: socket path in %s would be %d bytes, over the 107 a Unix socket allows: set a shorter TMPDIR", path, sockDir, n)
	}
	p, err := startIn(ctx, path, env, sockDir, log, timeout, cg)
	if err != nil {
		_ = os.RemoveAll(sockDir)
		removeCgroup(cg, log)
		return nil, err
	}
	return p, nil
}

func startIn(ctx context.Context, path string, env []string, sockDir string, log *slog.Logger, timeout time.Duration, cg *cgroup.Group) (*process, error) {
	cmd := exec.Command(path)
	cmd.Env = append(env[:len(env):len(env)], plugin.EnvUnixSocketDir+"="+sockDir)
	dieWithParent(cmd)
	cg.Prepare(cmd)
	cfg := plugins.ClientConfig(cmd)
	cfg.Logger = newHCLog(log)
	cfg.StartTimeout = timeout
	cfg.SyncStdout = &lineWriter{log: log, stream: "stdout"}
	cfg.SyncStderr = &lineWriter{log: log, stream: "stderr"}
	client := plugin.NewClient(cfg)

	type started struct {
		rpc plugin.ClientProtocol
		err error
	}
	done := make(chan started, 1)
	go func() {
		rpc, err := client.Client()
		done <- started{rpc, err}
	}()
	var s started
	select {
	case s = <-done:
	case <-ctx.Done():
		client.Kill()
		<-done
		return nil, fmt.Errorf("start %s: %w", path, ctx.Err())
	}
	if s.err != nil {
		client.Kill()
		return nil, fmt.Errorf("start %s: %w", path, s.err)
	}
	b, err := plugins.Dispense(s.rpc)
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	if err := cg.Add(cmd.Process.Pid); err != nil { // v1; a no-op rewrite on v2
		log.Warn("backend runs outside its cgroup", "pid", cmd.Process.Pid, "err", err)
	}
	return &process{client: client, backend: b, pid: cmd.Process.Pid, sockDir: sockDir, cg: cg, log: log}, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool { return p.client.Exited() }

// kill ends the process (gracefully when it still answers), waits for it
// and its log copiers, and removes its socket directory.
func (p *process) kill() {
	p.client.Kill()
	_ = os.RemoveAll(p.sockDir)
	removeCgroup(p.cg, p.log)
}
