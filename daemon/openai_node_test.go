package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/internal/config"
)

const testToken = "token-0123456789abcdef"

func tcpDaemon(t *testing.T) (*testDaemon, string) {
	t.Helper()
	return jobDaemon(t, 4*GiB, func(c *config.Config) {
		c.Daemon.HTTPListen, c.Daemon.HTTPToken = "127.0.0.1:0", testToken
	})
}

func TestTCPListenerNeedsToken(t *testing.T) {
	td, _ := tcpDaemon(t)
	base := "http://" + td.d.tcpAddr
	get := func(path, token string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tt := range []struct {
		path, token string
		status      int
	}{
		{"/v1/models", "", 401}, {"/v1/models", "wrong-token-0123456789", 401}, {"/v1/models", testToken, 200},
		{"/v1/leases", testToken, 403}, {"/v1/events", testToken, 403}, {"/healthz", testToken, 200},
		// The monitor page, its assets and its stream, behind the token.
		{"/", "", 401}, {"/", testToken, 200}, {"/ui/monitor.js", testToken, 200}, {"/ui/nothing.js", testToken, 404},
		{"/v1/monitor/events", "", 401}, {"/v1/monitor/events", testToken, 200}, {"/metrics", testToken, 403},
	} {
		if got := get(tt.path, tt.token); got != tt.status {
			t.Errorf("GET %s (token %q): %d, want %d", tt.path, tt.token, got, tt.status)
		}
	}
}

// repoRoot finds the directory holding go.mod.
func repoRoot(t *testing.T) string {
	dir, _ := os.Getwd()
	for ; dir != "/"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
	}
	t.Fatal("no go.mod above the test")
	return ""
}

// TestOpenAINodeClient points the official `openai` npm package (installed
// by make deps) at the TCP listener and transcribes a file with it.
func TestOpenAINodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	module := filepath.Join(repoRoot(t), ".cache", "node", "node_modules", "openai")
	if _, err := os.Stat(module); err != nil {
		t.Skipf("the openai npm package is not installed (make deps installs it into %s)", module)
	}
	td, audio := tcpDaemon(t)
	script := `
const OpenAI = require(process.env.OPENAI_MODULE);
const fs = require('fs');
(async () => {
  const client = new OpenAI({ apiKey: process.env.TOKEN, baseURL: process.env.BASE });
  const r = await client.audio.transcriptions.create({ file: fs.createReadStream(process.env.AUDIO), model: 'whisper-1', response_format: 'verbose_json' });
  const models = await client.models.list();
  console.log(JSON.stringify({ transcription: r, models: models.data.map(m => m.id) }));
})().catch(e => { console.error(e); process.exit(1); });`
	cmd := exec.Command(node, "-e", script)
	cmd.Env = append(os.Environ(), "OPENAI_MODULE="+module, "TOKEN="+testToken, "BASE=http://"+td.d.tcpAddr+"/v1", "AUDIO="+audio)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node client: %v\n%s", err, stderr)
	}
	var got struct {
		Transcription struct {
			Task     string `json:"task"`
			Text     string `json:"text"`
			Segments []any  `json:"segments"`
		} `json:"transcription"`
		Models []string `json:"models"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node output %s: %v", out, err)
	}
	if got.Transcription.Task != "transcribe" || len(got.Transcription.Segments) != 3 || !strings.Contains(strings.Join(got.Models, ","), "fake-tiny") {
		t.Errorf("through the openai client: %s", out)
	}
}
