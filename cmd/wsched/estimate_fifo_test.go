package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEstimateModelFIFO: --model naming a FIFO (or another non-regular
// file) is refused at once with a clear error; it used to block forever in
// open(2) waiting for a writer (issue 25 item 17). Also a regular file
// swapped for a FIFO after the Stat: readModelFile opens without blocking.
func TestEstimateModelFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "ggml-fifo.bin")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := runCLI(t, nil, "estimate", "--model", fifo, "--config", seedSim)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "is not a regular file") || !strings.Contains(err.Error(), "known model name") {
			t.Fatalf("estimate --model FIFO: %v, want a not-a-regular-file error", err)
		}
	case <-time.After(10 * time.Second):
		openWriter(fifo) // let the stuck open return so the test binary can end
		t.Fatal("estimate --model FIFO still runs after 10 s")
	}

	read := make(chan error, 1)
	go func() { _, err := readModelFile(fifo, 1<<20); read <- err }()
	select {
	case err := <-read:
		if err == nil || !strings.Contains(err.Error(), "is not a regular file") {
			t.Fatalf("readModelFile(FIFO): %v, want a not-a-regular-file error", err)
		}
	case <-time.After(10 * time.Second):
		openWriter(fifo)
		t.Fatal("readModelFile(FIFO) blocks")
	}
}

// openWriter opens and closes the FIFO's write end without blocking when
// no reader is waiting.
func openWriter(path string) {
	if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
}
