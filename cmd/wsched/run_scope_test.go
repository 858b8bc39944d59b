package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The gate keeps the child's own ExtraFiles at their numbers (fd 3
// onwards), its arguments in order, and leaves no gate fd open in the
// program it execs.
func TestGateKeepsExtraFilesAndArgs(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.WriteString("extra\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	child := exec.Command("sh", "-c", `read line <&3; echo "$line $1 $2"; [ -e /proc/self/fd/4 ] && echo "fd 4 open"; exit 7`, "prog", "a b", "c")
	child.ExtraFiles = []*os.File{r}
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	open, err := gate(child)
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		open()
		t.Fatal(err)
	}
	open()
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		_ = child.Process.Kill()
		t.Fatal("child did not end")
	}
	if child.ProcessState.ExitCode() != 7 {
		t.Errorf("exit code %d (%v), want 7", child.ProcessState.ExitCode(), err)
	}
	if got := strings.TrimSpace(out.String()); got != "extra a b c" {
		t.Errorf("child printed %q, want %q", got, "extra a b c")
	}
}
