package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/wsched/wsched/plugins/plugintest"
)

// TestVersion: `wsched --version` is one line (version, commit, Go,
// platform); `wsched version` adds each backend binary's version, asked
// through the plugin handshake without a daemon.
func TestVersion(t *testing.T) {
	out, _, err := runCLI(t, nil, "--version")
	line := regexp.MustCompile(`^wsched \S+ \(commit [^,]+(, modified)?, ` + regexp.QuoteMeta(runtime.Version()) + `, ` + runtime.GOOS + `/` + runtime.GOARCH + `\)\n$`)
	if err != nil || !line.MatchString(out) {
		t.Errorf("--version: %q, %v", out, err)
	}

	bin := plugintest.Build(t)
	cfg := filepath.Join(t.TempDir(), "wsched.toml")
	text := fmt.Sprintf("[backends]\nplugin_dir = %q\ndev_dirs = []\n", filepath.Dir(bin))
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(t, nil, "--config", cfg, "version")
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(out, "\n")
	if !line.MatchString(first + "\n") {
		t.Errorf("version's first line %q", first)
	}
	want := regexp.MustCompile(`(?m)^fake\s+0\.0\.0-test\s+-\s+` + regexp.QuoteMeta(bin) + `$`)
	if !strings.HasPrefix(rest, "backends (in "+filepath.Dir(bin)+"):\n") || !want.MatchString(rest) {
		t.Errorf("version's backends:\n%s", out)
	}
}

// TestRenderVersionEngines: the engines a backend reports in its Info
// metadata (whisper_cpp, sherpa_onnx) are shown by name.
func TestRenderVersionEngines(t *testing.T) {
	var b strings.Builder
	r := versionReport{build: build{Version: "v1", Commit: "0123456789abcdef", Go: "go1.26", Platform: "linux/amd64"}, BackendDirs: []string{"/p"},
		Backends: []backendVersion{
			{Name: "whisper", Path: "/p/wsched-backend-whisper", Version: "v1", Engines: map[string]string{"whisper.cpp": "1.9.5"}},
			{Name: "broken", Path: "/p/wsched-backend-broken", Error: "check: handshake failed"},
		}}
	if err := renderVersion(&b, r); err != nil {
		t.Fatal(err)
	}
	want := `wsched v1 (commit 0123456789ab, go1.26, linux/amd64)
backends (in /p):
NAME     VERSION  ENGINE             PATH
whisper  v1       whisper.cpp 1.9.5  /p/wsched-backend-whisper
broken   -        -                  /p/wsched-backend-broken
  ! check: handshake failed
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
