package enforce

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// MPSControlBin is NVIDIA's MPS control program.
const MPSControlBin = "nvidia-cuda-mps-control"

// MPSControl is an MPS control daemon wsched started ([enforcement] mps =
// "manage"), with pipe and log directories of its own under the state
// directory: outside the unit's PrivateTmp, where /tmp/nvidia-mps would be
// invisible to other users' clients.
type MPSControl struct {
	bin     string
	PipeDir string
	LogDir  string
}

// StartMPS starts `bin -d` with its pipes in dir/pipe and logs in dir/log,
// and waits (until ctx ends) for its control pipe.
func StartMPS(ctx context.Context, bin, dir string) (*MPSControl, error) {
	m := &MPSControl{bin: bin, PipeDir: filepath.Join(dir, "pipe"), LogDir: filepath.Join(dir, "log")}
	for _, d := range []string{m.PipeDir, m.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("start MPS: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, bin, "-d") // it forks its daemon and returns
	cmd.Env = m.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("start MPS: %s -d: %w: %s", bin, err, strings.TrimSpace(string(out)))
	}
	control := filepath.Join(m.PipeDir, "control")
	for {
		if st, err := os.Stat(control); err == nil && st.Mode()&os.ModeNamedPipe != 0 {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("start MPS: no control pipe %s: %w", control, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (m *MPSControl) env() []string {
	return append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+m.PipeDir, "CUDA_MPS_LOG_DIRECTORY="+m.LogDir)
}

// Stop asks the control daemon to quit.
func (m *MPSControl) Stop(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, m.bin)
	cmd.Env = m.env()
	cmd.Stdin = strings.NewReader("quit\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("stop MPS: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// LookupEnv is lookup with CUDA_MPS_PIPE_DIRECTORY naming m's pipes, for
// Probe.
func (m *MPSControl) LookupEnv(lookup func(string) (string, bool)) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if k == "CUDA_MPS_PIPE_DIRECTORY" {
			return m.PipeDir, true
		}
		return lookup(k)
	}
}
