package preload_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/enforce/preload"
)

// kit is the preload library, the fake libcuda.so.1 and the test program,
// compiled from source into a temporary directory.
type kit struct {
	dir   string // holds libcuda.so.1
	lib   string
	alloc string
	next  string // an interposer that uses dlsym(RTLD_NEXT, …)
}

func buildKit(t testing.TB) kit {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	dir := t.TempDir()
	k := kit{dir: dir, lib: filepath.Join(dir, preload.LibName), alloc: filepath.Join(dir, "alloc"), next: filepath.Join(dir, "next.so")}
	steps := [][]string{
		{"-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-fvisibility=hidden", "-shared", "-o", k.lib, "c/wsched_cuda_cap.c", "c/arrays.c", "c/report.c", "-ldl", "-lpthread"},
		{"-O2", "-Wall", "-Werror", "-fPIC", "-shared", "-Wl,-soname,libcuda.so.1", "-o", filepath.Join(dir, "libcuda.so.1"), "testdata/fakecuda.c", "-lpthread"},
		{"-O2", "-Wall", "-Werror", "-fPIC", "-shared", "-o", k.next, "testdata/next.c", "-ldl"},
		{"-O2", "-Wall", "-Werror", "-o", k.alloc, "testdata/alloc.c", filepath.Join(dir, "libcuda.so.1"), "-ldl", "-Wl,-rpath," + dir},
	}
	for _, args := range steps {
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
		}
	}
	return k
}

// run runs the test program with env added and returns its lines.
func (k kit) run(t testing.TB, env map[string]string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(k.alloc, args...)
	cmd.Env = append(os.Environ(), "WSCHED_LEASE_ID=", "WSCHED_MEMORY_BYTES=", "WSCHED_CUDA_LIMIT_BYTES=", "LD_PRELOAD=")
	for key, v := range env {
		cmd.Env = append(cmd.Env, key+"="+v)
	}
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("alloc %v: %v\n%s", args, err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// held is the test program started by start: at each "pause" it stops until
// a line comes on stdin.
type held struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// start starts the test program with env added to this process's
// environment; the caller stops it.
func (k kit) start(t testing.TB, env map[string]string, args ...string) held {
	t.Helper()
	cmd := exec.Command(k.alloc, args...)
	cmd.Env = os.Environ()
	for key, v := range env {
		cmd.Env = append(cmd.Env, key+"="+v)
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return held{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
}

// stop closes the program's stdin and waits for it to end.
func (h held) stop() { _ = h.stdin.Close(); _ = h.cmd.Wait() }
