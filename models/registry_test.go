package models

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/plugins/descriptor"
)

// testModels holds whisper.cpp's for-tests models: real headers, no weights.
const testModels = "../../shared/models/whisper-empty"

// copyTestModel copies a for-tests model into dir under name, skipping the
// test when the models are not there.
func copyTestModel(t *testing.T, from, dir, name string) string {
	t.Helper()
	src, err := os.Open(filepath.Join(testModels, from))
	if err != nil {
		t.Skipf("no for-tests model: %v", err)
	}
	defer src.Close()
	path := filepath.Join(dir, name)
	dst, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	return path
}

func write(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadRegistry(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "models")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tiny := copyTestModel(t, "for-tests-ggml-tiny.bin", dir, "ggml-tiny.bin")
	baseEn := copyTestModel(t, "for-tests-ggml-base.en.bin", dir, "ggml-base.en.bin")
	shadowed := write(t, filepath.Join(dir, "ggml-small.bin"), "not the configured one")
	broken := write(t, filepath.Join(dir, "ggml-broken.bin"), "not a model at all")
	write(t, filepath.Join(dir, "ggml-medium.bin"+PartialSuffix), "half a download")
	write(t, filepath.Join(dir, "README"), "ignored")
	write(t, filepath.Join(dir, "for-tests-ggml-tiny.bin"), "ignored")
	if err := os.Mkdir(filepath.Join(dir, "ggml-dir.bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	small := copyTestModel(t, "for-tests-ggml-small.bin", root, "small-custom.bin")
	sv := write(t, filepath.Join(root, "sensevoice", "model.onnx"), "0123456789")
	write(t, filepath.Join(root, "sensevoice", "tokens.txt"), "abc")

	reg, err := Load(context.Background(), config.Models{Dir: dir, Entries: []config.Model{
		{Name: "small", Backend: WhisperCpp, Path: small},
		{Name: "sensevoice", Backend: "sensevoice", Path: filepath.Dir(sv)},
		{Name: "gone", Backend: WhisperCpp, Path: filepath.Join(root, "nowhere.bin")},
	}}, testBackends)
	if err != nil {
		t.Fatal(err)
	}
	size := func(p string) int64 { st, _ := os.Stat(p); return st.Size() }
	want := []Model{
		{Name: "base.en", Backend: WhisperCpp, Path: baseEn, SizeBytes: size(baseEn), Origin: FromModelsDir},
		{Name: "broken", Backend: WhisperCpp, Path: broken, SizeBytes: 18, Origin: FromModelsDir, Problem: "not a whisper.cpp ggml model file (bad magic)"},
		{Name: "gone", Backend: WhisperCpp, Path: filepath.Join(root, "nowhere.bin"), Origin: FromConfig, Problem: "file missing"},
		// A backend no plugin directory provides: listed, with the reason.
		{Name: "sensevoice", Backend: "sensevoice", Path: filepath.Dir(sv), Origin: FromConfig,
			Problem: `backend "sensevoice" (known: exec, sherpa-onnx, whisper.cpp): no such backend`},
		{Name: "small", Backend: WhisperCpp, Path: small, SizeBytes: size(small), Origin: FromConfig, Shadows: shadowed},
		{Name: "tiny", Backend: WhisperCpp, Path: tiny, SizeBytes: size(tiny), Origin: FromModelsDir},
	}
	got := reg.Models()
	if len(got) != len(want) {
		t.Fatalf("models %s, want %d", reg.Names(), len(want))
	}
	for i := range want {
		g := got[i]
		hasHeader := g.Header != nil
		g.Header = nil
		if g.Origin == FromConfig && g.Entry.Name != g.Name {
			t.Errorf("%s: entry %+v", g.Name, g.Entry)
		}
		g.Entry = config.Model{}
		if g.Problem == "" && g.Descriptor.Name != g.Backend {
			t.Errorf("%s: descriptor %q for backend %q", g.Name, g.Descriptor.Name, g.Backend)
		}
		g.Descriptor = descriptor.Descriptor{}
		if len(g.Options) == 0 {
			g.Options = nil // config entries carry an empty table
		}
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("model %d\n got %+v\nwant %+v", i, g, want[i])
		}
		if wantHeader := want[i].Backend == WhisperCpp && want[i].Problem == ""; hasHeader != wantHeader {
			t.Errorf("%s: header read %v, want %v", g.Name, hasHeader, wantHeader)
		}
	}
	if got := reg.Partials(); len(got) != 1 || got[0] != "medium" {
		t.Errorf("partials %q, want [medium]", got)
	}
	if m, _ := reg.Lookup("small"); m.Header == nil || m.Header.NAudioLayer != 12 {
		t.Errorf("small: header of the configured file (12 audio layers) not read: %+v", m.Header)
	}
}

func TestLookup(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ggml-x.bin"), "junk")
	reg, err := Load(context.Background(), config.Models{Dir: dir, Entries: []config.Model{{Name: "y", Backend: "b", Path: filepath.Join(dir, "y")}}}, testBackends)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		msg  string
	}{
		{"x", ErrUnavailable, `model "x": not a whisper.cpp ggml model file (bad magic): model unavailable`},
		{"y", ErrUnavailable, `model "y": backend "b" (known: exec, sherpa-onnx, whisper.cpp): no such backend: model unavailable`},
		{"z", ErrUnknownModel, `model "z" (known: x, y): unknown model`},
	}
	for _, tt := range tests {
		if _, err := reg.Lookup(tt.name); !errors.Is(err, tt.err) || err.Error() != tt.msg {
			t.Errorf("Lookup(%s) = %v, want %s", tt.name, err, tt.msg)
		}
	}
}

func TestLoadMissingDir(t *testing.T) {
	reg, err := Load(context.Background(), config.Models{Dir: filepath.Join(t.TempDir(), "not-yet")}, testBackends)
	if err != nil || len(reg.Models()) != 0 || reg.Names() != "none" {
		t.Errorf("missing models_dir: %v, %v", reg.Names(), err)
	}
	notDir := write(t, filepath.Join(t.TempDir(), "file"), "x")
	if _, err := Load(context.Background(), config.Models{Dir: notDir}, testBackends); err == nil || !strings.Contains(err.Error(), "scan models_dir") {
		t.Errorf("models_dir is a file: error %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Load(ctx, config.Models{Entries: []config.Model{{Name: "a", Backend: "b", Path: "/a"}}}, testBackends); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestEstimateRequest: a ggml file is estimated from its header, equal to
// the known model it is the empty copy of.
func TestEstimateRequest(t *testing.T) {
	dir := t.TempDir()
	copyTestModel(t, "for-tests-ggml-base.bin", dir, "ggml-base.bin")
	reg, err := Load(context.Background(), config.Models{Dir: dir, Entries: []config.Model{
		{Name: "medium", Backend: "faster-whisper", Path: dir},
		{Name: "custom", Backend: "pytorch", Path: dir},
		{Name: "sv", Backend: "sensevoice", Path: dir},
		{Name: "gone", Backend: WhisperCpp, Path: "/nowhere.bin"},
	}}, testBackends)
	if err != nil {
		t.Fatal(err)
	}
	est := estimator.New(estimator.Config{}, nil)
	m, _ := reg.Lookup("base")
	req, err := m.EstimateRequest()
	if err != nil || req.Header == nil || req.Model != "ggml-base.bin" {
		t.Fatalf("base: %+v, %v", req, err)
	}
	fromFile, err := est.Estimate(req)
	if err != nil {
		t.Fatal(err)
	}
	// The descriptor's best_of (whisper.cpp's default 5) travels with the file's request.
	byName, err := est.Estimate(estimator.Request{Backend: estimator.WhisperCpp, Model: "base", BestOf: req.BestOf})
	if err != nil || fromFile.TotalBytes != byName.TotalBytes {
		t.Errorf("file estimate %d, by name %d (%v)", fromFile.TotalBytes, byName.TotalBytes, err)
	}
	if req, err := modelNamed(reg, "medium").EstimateRequest(); err != nil || req.Backend != estimator.FasterWhisper || req.Model != "medium" {
		t.Errorf("faster-whisper medium: %+v, %v", req, err)
	}
	for name, want := range map[string]error{"custom": estimator.ErrUnknownModel, "sv": ErrNoProfile, "gone": ErrUnavailable} {
		m := modelNamed(reg, name)
		if _, err := m.EstimateRequest(); !errors.Is(err, want) {
			t.Errorf("%s: error %v, want %v", name, err, want)
		}
	}
}

func modelNamed(r *Registry, name string) Model {
	for _, m := range r.Models() {
		if m.Name == name {
			return m
		}
	}
	return Model{}
}

// A models_dir of whisper.cpp's for-tests files (the shared test models) lists
// each as its plain name; a real ggml-NAME.bin next to one wins.
func TestScanDirAcceptsForTestsPrefix(t *testing.T) {
	dir := t.TempDir()
	copyTestModel(t, "for-tests-ggml-tiny.bin", dir, "for-tests-ggml-tiny.bin")
	copyTestModel(t, "for-tests-ggml-base.en.bin", dir, "for-tests-ggml-base.en.bin")
	real := copyTestModel(t, "for-tests-ggml-tiny.bin", dir, "ggml-tiny.bin")
	write(t, filepath.Join(dir, "for-tests-ggml-small.bin"+PartialSuffix), "x")
	r, err := Load(context.Background(), config.Models{Dir: dir}, testBackends)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Names(); got != "base.en, tiny" {
		t.Fatalf("names = %q, want %q", got, "base.en, tiny")
	}
	m, err := r.Lookup("tiny")
	if err != nil || m.Path != real {
		t.Fatalf("tiny = %+v, %v; want the real file %s", m, err, real)
	}
	if m, err := r.Lookup("base.en"); err != nil || m.Header == nil {
		t.Fatalf("base.en = %+v, %v; want its header read", m, err)
	}
	if p := r.Partials(); len(p) != 0 {
		t.Fatalf("partials = %v, want none (a for-tests partial is no download of ours)", p)
	}
}

// TestExecEntries: an exec entry's model path is its app directory, checked
// to exist, with no size (the app's files are not its model).
func TestExecEntries(t *testing.T) {
	dir := t.TempDir()
	reg, err := Load(context.Background(), config.Models{Entries: []config.Model{
		{Name: "sensevoice", Backend: execName, Path: "/api/v1/asr", Dir: dir, Command: []string{"python3", "main.py"}, Memory: 1 << 30},
		{Name: "gone", Backend: execName, Dir: filepath.Join(dir, "nowhere"), Command: []string{"app"}, Memory: 1 << 30},
	}}, testBackends)
	if err != nil {
		t.Fatal(err)
	}
	m, err := reg.Lookup("sensevoice")
	if err != nil || m.Path != dir || m.SizeBytes != 0 || m.Entry.Path != "/api/v1/asr" || m.MemoryBytes != 1<<30 {
		t.Errorf("sensevoice: %+v %v", m, err)
	}
	if _, err := reg.Lookup("gone"); err == nil || !strings.Contains(err.Error(), "app directory: file missing") {
		t.Errorf("gone: %v", err)
	}
}
