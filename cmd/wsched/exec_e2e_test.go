package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/internal/testshared"
)

// TestTranscribeThroughApp: `wsched transcribe --model sensevoice jfk.wav`
// runs on an existing app (the SenseVoice-shaped Python service in
// plugins/execbackend/testdata) through wsched-backend-exec, configured as
// in the README.
func TestTranscribeThroughApp(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found")
	}
	e := newE2E(t)
	plugins := filepath.Join(e.dir, "plugins")
	_ = os.Mkdir(plugins, 0o755)
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", plugins, "github.com/wsched/wsched/cmd/wsched-backend-exec").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	app, _ := filepath.Abs("../../plugins/execbackend/testdata/app")
	extra := fmt.Sprintf(`
[backends]
plugin_dir = %q
dev_dirs = []

[[backends.model]]
name = "sensevoice"
backend = "exec"
command = ["python3", "main.py"]
dir = %q
env = { PYTHONDONTWRITEBYTECODE = "1" }
memory = "3GiB"
health = "/health"
protocol = "multipart"
path = "/api/v1/asr"
field = "files"
text_json_path = "result.0.text"
`, plugins, app)
	f, err := os.OpenFile(e.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(extra)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := e.wsched("config", "check").CombinedOutput(); err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	e.serve()
	var stdout, stderr bytes.Buffer
	cmd := e.wsched("transcribe", "--model", "sensevoice", "--format", "srt", testshared.File(t, "audio/jfk.wav"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("transcribe: %v\n%s", err, stderr.String())
	}
	if out := stdout.String(); !strings.HasPrefix(out, "1\n00:00:00,000 --> 00:00:11,000\ndevice=cuda:0 pid=") || !strings.Contains(out, "lang=auto") {
		t.Errorf("srt:\n%s", out)
	}
	out, err := e.wsched("backends").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "exec") || !strings.Contains(string(out), "cpu,cuda") {
		t.Errorf("wsched backends: %v\n%s", err, out)
	}
}
