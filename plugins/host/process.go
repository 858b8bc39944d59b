package host

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/wsched/wsched/plugins"
)

// process is one running backend subprocess behind its go-plugin client.
type process struct {
	client  *plugin.Client
	backend plugins.Backend
	pid     int
}

// startProcess runs the backend at path with exactly env as its
// environment, completes go-plugin's handshake (AutoMTLS) and dispenses the
// Backend. Its logs go to log. ctx ends the start-up, not the process.
func startProcess(ctx context.Context, path string, env []string, log *slog.Logger, timeout time.Duration) (*process, error) {
	cmd := exec.Command(path)
	cmd.Env = env
	dieWithParent(cmd)
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
	return &process{client: client, backend: b, pid: cmd.Process.Pid}, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool { return p.client.Exited() }

// kill ends the process (gracefully when it still answers) and waits for
// it and its log copiers.
func (p *process) kill() { p.client.Kill() }
