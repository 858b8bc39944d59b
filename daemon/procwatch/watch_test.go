package procwatch

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"
)

func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func TestWatcherSeesKill(t *testing.T) {
	for _, polling := range []bool{false, true} {
		w, err := NewWatcher(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		w.polling = w.polling || polling
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()
		a, b := startSleep(t), startSleep(t)
		for _, c := range []*exec.Cmd{a, b} {
			if err := w.Watch(c.Process.Pid); err != nil {
				t.Fatal(err)
			}
		}
		_ = w.Watch(a.Process.Pid) // twice is harmless
		start := time.Now()
		_ = b.Process.Kill()
		_ = b.Wait() // reap, as a parent would; pidfd readiness does not need it
		if got := <-w.Exited(); got != b.Process.Pid {
			t.Fatalf("polling=%v: exited %d, want %d", polling, got, b.Process.Pid)
		}
		t.Logf("polling=%v: exit seen after %v", polling, time.Since(start))
		select {
		case pid := <-w.Exited():
			t.Fatalf("polling=%v: spurious exit of %d", polling, pid)
		case <-time.After(2 * PollInterval):
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestWatchGoneProcess(t *testing.T) {
	w, err := NewWatcher(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c := startSleep(t)
	pid := c.Process.Pid
	_ = c.Process.Kill()
	_ = c.Wait()
	if err := w.Watch(pid); err != nil {
		t.Fatal(err)
	}
	if got := <-w.Exited(); got != pid {
		t.Errorf("exited %d, want %d", got, pid)
	}
}

func TestRead(t *testing.T) {
	info, err := Read("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if info.UID != os.Getuid() || info.PPID != os.Getppid() || info.StartTicks == 0 || info.Name == "" {
		t.Errorf("self: %+v", info)
	}
	if !Alive("/proc", os.Getpid(), info.StartTicks) || Alive("/proc", os.Getpid(), info.StartTicks+1) {
		t.Error("Alive does not tell a reused PID apart")
	}
	if _, err := Read("/proc", 1<<30); err == nil {
		t.Error("no error for a missing PID")
	}
	var got Info
	if err := parseStat([]byte("42 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 12345 20"), &got); err != nil || got.Name != "a (weird) name" || got.PPID != 1 || got.StartTicks != 12345 {
		t.Errorf("parseStat: %+v %v", got, err)
	}
}

// TestRunStopsWithUnreadExits: exits nobody reads do not keep Run from
// returning when its context ends.
func TestRunStopsWithUnreadExits(t *testing.T) {
	w, err := NewWatcher(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for i := 0; i < 300; i++ { // more exits than the channel holds
		c := exec.Command("true")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		_ = w.Watch(c.Process.Pid)
		_ = c.Wait()
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel with unread exits")
	}
}

func TestWatchProcessReusedPID(t *testing.T) {
	w, err := NewWatcher(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c := startSleep(t)
	info, _ := Read("/proc", c.Process.Pid)
	if err := w.WatchProcess("/proc", c.Process.Pid, info.StartTicks+1); err != nil {
		t.Fatal(err)
	}
	if got := <-w.Exited(); got != c.Process.Pid {
		t.Errorf("a PID with another start time was not reported gone: %d", got)
	}
}
