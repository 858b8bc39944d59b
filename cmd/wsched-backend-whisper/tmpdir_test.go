//go:build whisper

package main

import (
	"os"
	"testing"

	"github.com/wsched/wsched/internal/testtmp"
)

// TestMain runs the tests in a TMPDIR of their own and fails when they leave
// anything there (backend sockets, ffmpeg pipes, copies of audio).
func TestMain(m *testing.M) { os.Exit(testtmp.Main(m)) }
