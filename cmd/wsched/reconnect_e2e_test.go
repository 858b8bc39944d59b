package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/plugins/plugintest"
)

// killDaemon ends a daemon with SIGKILL.
func killDaemon(d *exec.Cmd) {
	_ = d.Process.Signal(syscall.SIGKILL)
	_ = d.Wait()
}

// terminateDaemon stops a daemon gracefully, with SIGTERM.
func terminateDaemon(d *exec.Cmd) {
	_ = d.Process.Signal(syscall.SIGTERM)
	_ = d.Wait()
}

// TestLeaseWaitSurvivesKill (issue 23, item 5): `wsched lease --wait`
// queued behind a full GPU when the daemon is killed -9 reconnects (with
// backoff, within its wait), asks again with its priority, and gets its
// lease once the memory is freed — instead of exiting with EOF.
func TestLeaseWaitSurvivesKill(t *testing.T) {
	holder := sleeper(t)
	stdout, stderr := waitThroughStop(t, killDaemon, "lease", "--memory", "8GiB", "--wait", "60s", "--priority", "high", "--json", "--holder-pid", fmt.Sprint(holder.Process.Pid))
	var l api.Lease
	if err := json.Unmarshal([]byte(stdout), &l); err != nil || l.State != "granted" || l.MemoryBytes != 8*GiB || l.Labels[api.IdempotencyLabel] == "" {
		t.Fatalf("lease: %+v %v\n%s\n%s", l, err, stdout, stderr)
	}
}

// TestRunWaitSurvivesKill (issue 23, item 5): the same for `wsched run`.
func TestRunWaitSurvivesKill(t *testing.T) {
	stdout, stderr := waitThroughStop(t, killDaemon, "run", "--memory", "8GiB", "--wait", "60s", "--priority", "high", "--", "echo", "ran")
	if stdout != "ran\n" || !strings.Contains(stderr, "granted: 8.00 GiB") {
		t.Fatalf("run: stdout %q\n%s", stdout, stderr)
	}
}

// waitThroughStop runs wsched ARGS, which waits in the queue behind a full
// GPU; stops the daemon with stop (killDaemon, terminateDaemon) while it
// waits, starts another, checks that the request is queued again with
// priority high, frees the memory, and returns the command's output once
// it succeeded.
func waitThroughStop(t *testing.T, stop func(*exec.Cmd), args ...string) (string, string) {
	e := newE2E(t)
	daemon := e.serve()
	outside := e.leaseFor(20*GiB, "")
	cmd := e.wsched(args...)
	var stdout bytes.Buffer
	var stderr testshared.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	c := e.client()
	waitFor(t, 10*time.Second, "the request to queue", func() bool {
		g, err := c.GPUs(context.Background())
		return err == nil && len(g.Queue) == 1
	})
	c.Close()
	stop(daemon)
	time.Sleep(300 * time.Millisecond) // down for a while: the client polls
	e.serve()
	c = e.client()
	defer c.Close()
	waitFor(t, 10*time.Second, "the request to queue again", func() bool {
		g, err := c.GPUs(context.Background())
		return err == nil && len(g.Queue) == 1 && g.Queue[0].Priority == "high"
	})
	if _, err := c.Release(context.Background(), outside.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("%s: %v\n%s", args[0], err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not finish:\n%s", args[0], stderr.String())
	}
	if !strings.Contains(stderr.String(), "asking again, priority high, once it is back") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	return stdout.String(), stderr.String()
}

// TestRetriedGrantIsSameLease (issue 23 item 5, issue 25 item 13): a
// lease request retried with its idempotency key after the daemon was
// killed -9 — the grant made and recorded, its answer lost — is answered
// with the same lease, not a second grant; another key gets a new one.
func TestRetriedGrantIsSameLease(t *testing.T) {
	e := newE2E(t)
	daemon := e.serve()
	holder := sleeper(t)
	req := api.LeaseRequest{MemoryBytes: 6 * GiB, TTLSeconds: 3600, IdempotencyKey: "k-123", Holder: &api.HolderRequest{PID: holder.Process.Pid}}
	c := e.client()
	first, err := c.Acquire(context.Background(), req)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	killDaemon(daemon)
	e.serve()
	c = e.client()
	defer c.Close()
	again, err := c.Acquire(context.Background(), req)
	if err != nil || again.ID != first.ID || again.State != "granted" || again.Env["WSCHED_LEASE_ID"] != first.ID {
		t.Fatalf("retried request: %+v %v, want lease %s", again, err, first.ID)
	}
	ls, err := c.Leases(context.Background())
	if err != nil || len(ls) != 1 {
		t.Fatalf("leases after the retry: %d %v", len(ls), err)
	}
	req.IdempotencyKey = "k-456"
	other, err := c.Acquire(context.Background(), req)
	if err != nil || other.ID == first.ID {
		t.Fatalf("another key: %+v %v", other, err)
	}
	req.IdempotencyKey = strings.Repeat("x", 129)
	if _, err := c.Acquire(context.Background(), req); err == nil || !strings.Contains(err.Error(), "idempotency_key") {
		t.Errorf("a 129-byte key: %v", err)
	}
}

// TestTranscribeReattachesAfterKill (issue 23, item 5): the daemon is
// killed -9 while `wsched transcribe` follows its job — waiting for memory,
// or in the middle of transcribing — and after the restart transcribe
// re-attaches to the job by its ID and writes the result.
func TestTranscribeReattachesAfterKill(t *testing.T) {
	t.Run("queued", func(t *testing.T) { transcribeThroughKill(t, false) })
	t.Run("processing", func(t *testing.T) { transcribeThroughKill(t, true) })
}

func transcribeThroughKill(t *testing.T, processing bool) {
	e := newE2E(t)
	audio := e.withFakeBackend(t)
	if processing {
		t.Setenv(plugintest.Env(plugintest.SegmentDelay), "400ms") // the daemon's backends inherit it
	}
	daemon := e.serve()
	var block api.Lease
	if !processing {
		block = e.leaseFor(20*GiB, "") // the job waits for memory
	}
	out := filepath.Join(e.dir, "out")
	cmd := e.wsched("transcribe", "--format", "srt", "--output", out, audio)
	var stderr testshared.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	c := e.client()
	waitFor(t, 10*time.Second, "the job to wait for memory or run", func() bool {
		if processing {
			return strings.Contains(stderr.String(), "GPU 0")
		}
		g, err := c.GPUs(context.Background())
		return err == nil && len(g.Queue) == 1 && strings.Contains(stderr.String(), "pending")
	})
	c.Close()
	killDaemon(daemon)
	time.Sleep(300 * time.Millisecond)
	e.serve()
	c = e.client()
	defer c.Close()
	if !processing {
		if _, err := c.Release(context.Background(), block.ID); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("transcribe: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("transcribe did not finish:\n%s", stderr.String())
	}
	data, err := os.ReadFile(filepath.Join(out, "speech.srt"))
	if err != nil || !strings.HasPrefix(string(data), "1\n00:00:00,000 --> ") {
		t.Errorf("result: %q %v", data, err)
	}
	for _, want := range []string{"lost the daemon while following job", "the daemon is back; re-attached to job"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}
