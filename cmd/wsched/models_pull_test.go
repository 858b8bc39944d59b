package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/models"
)

// TestModelsPullUnreachable: `wsched models pull base` with [models] url on
// a loopback port nothing listens on (connection refused; no external
// network) fails at once, names what failed and the two ways out, and
// leaves no ggml-base.bin.partial behind.
func TestModelsPullUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/whisper.cpp"
	l.Close()
	dir := filepath.Join(t.TempDir(), "models")
	_, stderr, err := runCLI(t, nil, "--config", modelsConfig(t, dir, url, ""), "models", "pull", "base")
	if !errors.Is(err, models.ErrUnreachable) {
		t.Fatalf("error %v, want ErrUnreachable\n%s", err, stderr)
	}
	for _, want := range []string{"cannot reach 127.0.0.1:", "connection refused", "[models] url", "copy ggml-base.bin into " + dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if strings.Contains(stderr, "resuming") {
		t.Errorf("an unreachable server was retried:\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "ggml-base.bin.partial")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("partial file left behind: %v", err)
	}
}
