// Package daemontest runs a real daemon in a test and drives jobs through
// its API: the helpers the backends' end-to-end smoke tests share.
package daemontest

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon"
	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/testtmp"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

// Run starts a daemon with cfg for the test's lifetime (logging to t) and
// returns a client once it answers.
func Run(t *testing.T, cfg *config.Config) *client.Client {
	t.Helper()
	d, err := daemon.New(daemon.Options{Config: cfg, Log: slog.New(slog.NewTextHandler(testshared.LogWriter(t), nil)), Version: "smoke"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c := client.New(cfg.Daemon.Socket)
	t.Cleanup(c.Close)
	testshared.WaitHealthy(t, c)
	return c
}

// JobStates submits a job, reads its event stream to the end, checks the
// states it went through (space-separated, e.g. "pending loading processing
// completed"), and returns the finished job.
func JobStates(t *testing.T, c *client.Client, req api.JobRequest, want string) api.Job {
	t.Helper()
	ctx := context.Background()
	j, err := c.SubmitJob(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	err = c.JobEvents(ctx, j.ID, func(ev api.JobEvent) error {
		if ev.Type == api.JobEventState {
			states = append(states, string(ev.State))
		}
		return nil
	})
	if got := strings.Join(states, " "); err != nil || got != want {
		t.Errorf("job %s states %q (%v), want %q", j.ID, got, err, want)
	}
	j, err = c.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// Curl posts file to the daemon's OpenAI-compatible endpoint on socket with
// curl, as a client would, and returns the content type and body; the test
// is skipped when curl is not installed.
func Curl(t *testing.T, socket, file, model, format string) (string, string) {
	t.Helper()
	path, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	out, err := exec.Command(path, "-sS", "--unix-socket", socket, "-w", "\n%{content_type}",
		"-F", "file=@"+file, "-F", "model="+model, "-F", "response_format="+format,
		"http://wsched/v1/audio/transcriptions").Output()
	if err != nil {
		t.Fatalf("curl (%s): %v", format, err)
	}
	s := string(out)
	cut := strings.LastIndexByte(s, '\n')
	return s[cut+1:], s[:cut]
}

// RunSim starts a daemon in-process on the simulated GPUs of the config file
// at path (e.g. testdata/sim-8x4090.toml), with its state and socket in a
// short temporary directory and a reading every 50 ms; log receives its log.
// It returns a client once the daemon answers, and the simulation, whose
// readings a test may change.
func RunSim(t *testing.T, path string, log *slog.Logger) (*client.Client, *inventory.Sim) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data, filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	dir := testtmp.ShortDir(t)
	cfg.Daemon.StateDir = filepath.Join(dir, "state")
	cfg.Daemon.Socket = filepath.Join(dir, "d.sock")
	cfg.Inventory.RefreshInterval = units.Duration(50 * time.Millisecond)
	cfg.Inventory.MaxAge = units.Duration(20 * time.Millisecond)
	sim := inventory.NewSim(cfg.Inventory.Sim)
	prov, err := inventory.NewNVML(sim.Interface(), inventory.WithName("sim"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(daemon.Options{Config: cfg, Log: log, Provider: prov, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	c := client.New(cfg.Daemon.Socket)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
		c.Close()
	})
	testshared.WaitHealthy(t, c)
	return c, sim
}
