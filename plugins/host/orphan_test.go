package host

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/testtmp"
)

// orphanEnv makes the test binary a stand-in daemon that starts the backend
// named by the variable, prints its PID and waits to be killed.
const orphanEnv = "WSCHED_HOST_TEST_ORPHAN"

func orphanChild(path string) int {
	p, err := startProcess(context.Background(), path, os.Environ(), slog.New(slog.DiscardHandler), time.Minute, nil)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println(p.pid)
	select {}
}

// TestBackendDiesWithDaemon: a backend whose daemon is killed with SIGKILL
// (no chance to stop it) is killed by the kernel, not left holding memory
// that no lease accounts for any more.
func TestBackendDiesWithDaemon(t *testing.T) {
	daemon := exec.Command(os.Args[0], "-test.run=^$")
	// Its TMPDIR is the test's: the backend's socket directory outlives a
	// SIGKILLed daemon (in production, systemd's PrivateTmp goes with it).
	daemon.Env = append(os.Environ(), orphanEnv+"="+fakeBinary, "TMPDIR="+testtmp.ShortDir(t))
	out, err := daemon.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		_ = daemon.Process.Kill()
		_ = daemon.Wait()
		t.Fatalf("stand-in daemon said %q (%v)", line, err)
	}
	if gone(pid) {
		t.Fatalf("backend %d not running before the daemon died", pid)
	}
	if err := daemon.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = daemon.Wait()
	deadline := time.Now().Add(30 * time.Second) // a hang, not a timing assertion
	for !gone(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("backend %d outlived its daemon", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gone reports whether pid has exited (a zombie waiting for a reaper counts).
func gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || strings.HasPrefix(strings.TrimSpace(string(stat[i+1:])), "Z")
}
