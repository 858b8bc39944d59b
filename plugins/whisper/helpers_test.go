//go:build whisper

package whisper

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/plugins"
)

func sharedFile(t testing.TB, name string) string { t.Helper(); return testshared.File(t, name) }

// repoFile is NAME relative to the repository root (where go.mod is).
func repoFile(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, name)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod above the working directory")
		}
		dir = parent
	}
}

func tinyEN(t testing.TB) string {
	return sharedFile(t, "models/whisper-empty/for-tests-ggml-tiny.en.bin")
}
func tiny(t testing.TB) string { return sharedFile(t, "models/whisper-empty/for-tests-ggml-tiny.bin") }
func jfk(t testing.TB) string  { return sharedFile(t, "audio/jfk.wav") }

// newBackend returns a Backend logging through the test.
func newBackend(t testing.TB, opts Options) *Backend {
	t.Helper()
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(testshared.LogWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return New(opts)
}

// loaded returns a Backend with model loaded on the CPU, flash attention off.
func loaded(t testing.TB, opts Options, model string) *Backend {
	t.Helper()
	b := newBackend(t, opts)
	if _, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: model, Device: "cpu", Threads: 2}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Unload(t.Context()) })
	return b
}

// writeTempFile writes data to a new file in a temporary directory.
func writeTempFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// pcm16WAV encodes interleaved samples as a 16-bit PCM WAV.
func pcm16WAV(rate, channels int, samples []float32) []byte {
	var b bytes.Buffer
	put := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	put(uint32(36 + 2*len(samples)))
	b.WriteString("WAVEfmt ")
	put(uint32(16))
	put(uint16(1))
	put(uint16(channels))
	put(uint32(rate))
	put(uint32(rate * channels * 2))
	put(uint16(channels * 2))
	put(uint16(16))
	b.WriteString("data")
	put(uint32(2 * len(samples)))
	for _, v := range samples {
		put(int16(math.Round(float64(v) * 32767)))
	}
	return b.Bytes()
}

// repeatWAV writes jfk.wav's samples n times over as one 16 kHz WAV.
func repeatWAV(t testing.TB, n int) string {
	t.Helper()
	data, err := os.ReadFile(jfk(t))
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(data, []byte("data"))
	pcm := data[at+8:]
	var samples []float32
	for range n {
		for i := 0; i+1 < len(pcm); i += 2 {
			samples = append(samples, float32(int16(binary.LittleEndian.Uint16(pcm[i:])))/32768)
		}
	}
	return writeTempFile(t, "long.wav", pcm16WAV(16000, 1, samples))
}

// events collects what a Transcribe call emits.
type events struct {
	progress []float64
	segments []plugins.Segment
	order    []plugins.EventKind
}

func (e *events) emit(ev plugins.Event) error {
	e.order = append(e.order, ev.Kind)
	switch ev.Kind {
	case plugins.EventProgress:
		e.progress = append(e.progress, ev.Percent)
	case plugins.EventSegment:
		e.segments = append(e.segments, ev.Segment)
	}
	return nil
}
