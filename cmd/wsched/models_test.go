package main

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/models"
)

// modelServer serves fake model bytes for any ggml-*.bin; the first
// request is cut after dropAt bytes when dropAt > 0.
type modelServer struct {
	*httptest.Server
	data   []byte
	dropAt int
	mu     sync.Mutex
	ranges []string
}

func newModelServer(t *testing.T, dropAt int) *modelServer {
	t.Helper()
	s := &modelServer{data: bytes.Repeat([]byte("whisper-model-bytes "), 150_000), dropAt: dropAt}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.ranges)
		s.ranges = append(s.ranges, r.Header.Get("Range"))
		s.mu.Unlock()
		if n == 0 && s.dropAt > 0 {
			w.Header().Set("Content-Length", strconv.Itoa(len(s.data)))
			w.Write(s.data[:s.dropAt])
			w.(http.Flusher).Flush()
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		http.ServeContent(w, r, "model.bin", time.Time{}, bytes.NewReader(s.data))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *modelServer) sha1() string { sum := sha1.Sum(s.data); return hex.EncodeToString(sum[:]) }

func (s *modelServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges...)
}

// modelsConfig writes a config whose models_dir and models_url are given
// (either may be "") and returns its path.
func modelsConfig(t *testing.T, dir, url, extra string) string {
	t.Helper()
	text := "[inventory]\nprovider = \"none\"\n[backends]\n"
	if dir != "" {
		text += fmt.Sprintf("models_dir = %q\n", dir)
	}
	if url != "" {
		text += fmt.Sprintf("models_url = %q\n", url)
	}
	path := filepath.Join(t.TempDir(), "wsched.toml")
	if err := os.WriteFile(path, []byte(text+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestModelsPullResume: a dropped transfer fails and keeps the partial
// file; the next pull resumes it with a Range request, shows progress
// lines and verifies the checksum; a third finds the file.
func TestModelsPullResume(t *testing.T) {
	const cut = 1 << 20
	s := newModelServer(t, cut)
	dir := filepath.Join(t.TempDir(), "models")
	cfg := modelsConfig(t, dir, s.URL, "")
	_, stderr, err := runCLI(t, nil, "--config", cfg, "models", "pull", "tiny", "--sha1", s.sha1(), "--retries", "0")
	if !errors.Is(err, models.ErrTransfer) {
		t.Fatalf("interrupted pull: error %v, want ErrTransfer\n%s", err, stderr)
	}
	final := filepath.Join(dir, "ggml-tiny.bin")
	if st, err := os.Stat(final + models.PartialSuffix); err != nil || st.Size() != cut {
		t.Fatalf("partial file after the drop: %v, %v", st, err)
	}

	stdout, stderr, err := runCLI(t, nil, "--config", cfg, "models", "pull", "tiny", "--sha1", s.sha1())
	if err != nil {
		t.Fatalf("resumed pull: %v\n%s", err, stderr)
	}
	if got := s.requests(); len(got) != 2 || got[1] != "bytes="+strconv.Itoa(cut)+"-" {
		t.Errorf("Range headers %q", got)
	}
	want := fmt.Sprintf("saved tiny: %s (2.86 MiB, resumed after 1.00 MiB, SHA-1 %s verified)\n", final, s.sha1())
	if stdout != want {
		t.Errorf("stdout\n got %q\nwant %q", stdout, want)
	}
	for _, line := range []string{"tiny: resuming at 1.00 MiB\ntiny:  35% 1.00 MiB of 2.86 MiB\n", "tiny: 100% 2.86 MiB of 2.86 MiB, ", "tiny: 2.86 MiB downloaded; verifying SHA-1\n"} {
		if !strings.Contains(stderr, line) {
			t.Errorf("stderr lacks %q:\n%s", line, stderr)
		}
	}
	// Reads are as the network delivers them: between 35% and 100%, at
	// least one line per tenth passed, each with a rate and an ETA.
	if n := len(progressLine.FindAllString(stderr, -1)); n < 5 {
		t.Errorf("%d progress lines with rate and ETA:\n%s", n, stderr)
	}
	if strings.Contains(stderr, "\r") {
		t.Error("a bar was drawn on a non-terminal")
	}
	if data, _ := os.ReadFile(final); !bytes.Equal(data, s.data) {
		t.Error("the saved file differs from the served one")
	}

	stdout, _, err = runCLI(t, nil, "--config", cfg, "models", "pull", "tiny")
	if err != nil || !strings.HasPrefix(stdout, "tiny is already there (2.86 MiB): ") {
		t.Errorf("third pull: %q, %v", stdout, err)
	}
}

// TestModelsPullChecksumMismatch: the served bytes are not the published
// tiny model: the file is deleted and the error names both checksums.
func TestModelsPullChecksumMismatch(t *testing.T) {
	s := newModelServer(t, 0)
	dir := t.TempDir()
	_, _, err := runCLI(t, nil, "--config", modelsConfig(t, dir, s.URL, ""), "models", "pull", "tiny")
	want := fmt.Sprintf("pull tiny: SHA-1 mismatch for ggml-tiny.bin: expected bd577a113a864445d4c299885e0cb97d4ba92b5f, got %s; deleted %s: checksum mismatch",
		s.sha1(), filepath.Join(dir, "ggml-tiny.bin.partial"))
	if !errors.Is(err, models.ErrChecksum) || err.Error() != want {
		t.Errorf("error\n got %v\nwant %s", err, want)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("files left: %v", left)
	}
}

// TestModelsPullFlags: --dir and --url win over the config; the config's
// models_dir over its default; WSCHED_MODELS_DIR over the config.
func TestModelsPullFlags(t *testing.T) {
	s := newModelServer(t, 0)
	cfgDir, envDir, flagDir := t.TempDir(), t.TempDir(), t.TempDir()
	cfg := modelsConfig(t, cfgDir, "http://127.0.0.1:1/unused", "")
	tests := []struct {
		name string
		env  map[string]string
		args []string
		dir  string
	}{
		{"flags", nil, []string{"--url", s.URL, "--dir", flagDir}, flagDir},
		{"env", map[string]string{"WSCHED_MODELS_DIR": envDir}, []string{"--url", s.URL}, envDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--config", cfg, "models", "pull", "base.en-q5_1"}, tt.args...)
			stdout, stderr, err := runCLI(t, tt.env, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			path := filepath.Join(tt.dir, "ggml-base.en-q5_1.bin")
			if !strings.HasPrefix(stdout, "saved base.en-q5_1: "+path+" (2.86 MiB, SHA-1 ") || !strings.HasSuffix(stdout, "; no published checksum: not verified)\n") {
				t.Errorf("stdout %q", stdout)
			}
		})
	}
	if _, _, err := runCLI(t, nil, "--config", cfg, "models", "pull", "tiny", "--sha1", "xyz"); err == nil || !strings.Contains(err.Error(), "want 40 hex digits") {
		t.Errorf("bad --sha1: %v", err)
	}
	if _, _, err := runCLI(t, nil, "--config", cfg, "models", "pull", "giant"); !errors.Is(err, models.ErrUnknownModel) || !strings.Contains(err.Error(), "large-v3-turbo-q5_0") {
		t.Errorf("unknown model: %v", err)
	}
}

var progressLine = regexp.MustCompile(`(?m)^tiny: +\d+% [\d.]+ MiB of 2\.86 MiB, [\d.]+ [MG]iB/s, ETA \d+s$`)

const modelsSim = `[inventory]
provider = "sim"
[[inventory.sim]]
name = "NVIDIA GeForce RTX 4090"
memory = "24GiB"
used = "22GiB"
[[inventory.sim]]
name = "NVIDIA GeForce RTX 3060"
memory = "12GiB"
`

func TestModelsList(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(testModels, "for-tests-ggml-base.bin"))
	if err != nil {
		t.Skipf("no for-tests model: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ggml-base.bin"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ggml-tiny.bin.partial"), src[:1000], 0o644); err != nil {
		t.Fatal(err)
	}
	text := modelsSim + fmt.Sprintf("[backends]\nmodels_dir = %q\n[[models.model]]\nname = \"large\"\nbackend = \"whisper.cpp\"\npath = \"/nowhere/ggml-large-v3.bin\"\n", dir)
	cfg := filepath.Join(t.TempDir(), "wsched.toml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	out, _, err := runCLI(t, nil, "--config", cfg, "models", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var v modelsView
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("models list --json does not decode: %v\n%s", err, out)
	}
	if v.ModelsDir != dir || len(v.GPUs) != 2 || len(v.Models) != 2 || len(v.Partial) != 1 || v.Partial[0] != "tiny" {
		t.Fatalf("view: %+v", v)
	}
	base, large := v.Models[0], v.Models[1]
	if base.Name != "base" || base.Origin != models.FromModelsDir || base.SizeBytes != int64(len(src)) || base.Estimate == nil {
		t.Fatalf("base: %+v", base)
	}
	if e := base.Estimate; len(e.GPUs) != 2 || e.GPUs[0].Sufficient || !e.GPUs[1].Sufficient || e.GPUs[1].Copies < 2 {
		t.Errorf("base fits: %+v", e.GPUs)
	}
	if large.Name != "large" || large.Problem != "file missing" || large.Estimate != nil || large.EstimateError != "" {
		t.Errorf("large: %+v", large)
	}

	table, _, err := runCLI(t, nil, "--config", cfg, "models", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"2 model(s); models_dir " + dir,
		"\nunfinished download: tiny (`wsched models pull tiny` resumes it)\n",
		"NAME   BACKEND            SIZE    ESTIMATE  GPU 0  GPU 1",
		"base   whisper.cpp  561.96 KiB  " + units.FormatBytes(base.Estimate.RecommendedBytes) + "  no     yes ×" + strconv.FormatInt(base.Estimate.GPUs[1].Copies, 10),
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if !regexp.MustCompile(`\nlarge +whisper\.cpp +- +- +- +- +/nowhere/ggml-large-v3\.bin\n  ! file missing\n`).MatchString(table) {
		t.Errorf("table lacks the missing model and its problem:\n%s", table)
	}
}

func TestPullProgressRendering(t *testing.T) {
	clock := time.Unix(0, 0)
	now := func() time.Time { return clock }
	step := func(p *pullProgress, bytes, total int64, attempt int) {
		clock = clock.Add(time.Second)
		p.update(models.Progress{Model: "tiny", Bytes: bytes, TotalBytes: total, ResumedBytes: 0, Attempt: attempt})
	}
	var tty bytes.Buffer
	bar := newPullProgress(&tty, true, now)
	bar.update(models.Progress{Model: "tiny", Bytes: 0, TotalBytes: 100 << 20, Attempt: 1})
	step(bar, 10<<20, 100<<20, 1)
	step(bar, 100<<20, 100<<20, 1)
	bar.finish()
	wantTTY := "\rtiny: [                              ]   0% 0 B of 100.00 MiB\x1b[K" +
		"\rtiny: [===                           ]  10% 10.00 MiB of 100.00 MiB, 10.00 MiB/s, ETA 9s\x1b[K" +
		"\rtiny: [==============================] 100% 100.00 MiB of 100.00 MiB, 50.00 MiB/s\x1b[K\n"
	if tty.String() != wantTTY {
		t.Errorf("terminal output\n got %q\nwant %q", tty.String(), wantTTY)
	}

	var plain bytes.Buffer
	lines := newPullProgress(&plain, false, now)
	lines.update(models.Progress{Model: "tiny", Bytes: 30 << 20, TotalBytes: 100 << 20, ResumedBytes: 30 << 20, Attempt: 1})
	for b := int64(31 << 20); b <= 100<<20; b += 5 << 20 {
		step(lines, b, 100<<20, 1)
	}
	step(lines, 100<<20, 100<<20, 1)
	lines.update(models.Progress{Model: "tiny", Bytes: 100 << 20, TotalBytes: 100 << 20, Attempt: 1, Verifying: true})
	got := plain.String()
	if n := strings.Count(got, "\n"); n != 10 || !strings.HasPrefix(got, "tiny: resuming at 30.00 MiB\ntiny:  30% 30.00 MiB of 100.00 MiB\n") ||
		!strings.Contains(got, "tiny:  41% 41.00 MiB of 100.00 MiB, 3.67 MiB/s, ETA 16s\ntiny:  51% ") ||
		!strings.HasSuffix(got, "tiny:  91% 91.00 MiB of 100.00 MiB, 4.69 MiB/s, ETA 2s\ntiny: 100% 100.00 MiB of 100.00 MiB, 4.67 MiB/s\ntiny: 100.00 MiB downloaded; verifying SHA-1\n") {
		t.Errorf("plain output (%d lines):\n%s", n, got)
	}
}
