package plugins_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
)

// wordBackend "transcribes" a file into one segment: the file's size.
// docs/plugins.md shows this code; keeping it here makes sure it compiles.
type wordBackend struct{ log *slog.Logger }

func (b *wordBackend) Info(context.Context) (plugins.Info, error) {
	return plugins.Info{Name: "words", Version: "0.1.0", ModelFormats: []string{"none"}, Devices: []string{"cpu"}}, nil
}

func (b *wordBackend) Load(_ context.Context, req plugins.LoadRequest) (plugins.MemoryReport, error) {
	if _, err := os.Stat(req.ModelPath); err != nil {
		return plugins.MemoryReport{}, fmt.Errorf("load %s: %w: %w", req.ModelPath, plugins.ErrModelNotFound, err)
	}
	b.log.Info("loaded", "model", req.ModelPath, "device", req.Device)
	return plugins.MemoryReport{ModelBytes: 1 << 20}, nil // Serve fills in TotalBytes
}

func (b *wordBackend) Transcribe(ctx context.Context, req plugins.TranscribeRequest, emit func(plugins.Event) error) (plugins.Result, error) {
	fi, err := os.Stat(req.AudioPath)
	if err != nil {
		return plugins.Result{}, fmt.Errorf("transcribe: %w: %w", plugins.ErrBadAudio, err)
	}
	seg := plugins.Segment{End: time.Second, Text: fmt.Sprintf("%d bytes", fi.Size())}
	if err := emit(plugins.SegmentEvent(seg)); err != nil {
		return plugins.Result{}, err // the host went away: stop
	}
	return plugins.Result{Language: "en", Duration: time.Second, Text: seg.Text}, nil
}

func (b *wordBackend) Unload(context.Context) error { return nil }
func (b *wordBackend) Health(context.Context) error { return nil }

// A backend's main: build the logger before Serve, which redirects os.Stderr.
func ExampleServe() {
	log := plugins.NewLogger(os.Stderr, slog.LevelInfo)
	plugins.Serve(&wordBackend{log: log})
}

// TestExampleBackend runs the documented backend through the protocol.
func TestExampleBackend(t *testing.T) {
	b := plugintest.Connect(t, &wordBackend{log: slog.New(slog.DiscardHandler)})
	ctx := t.Context()
	if _, err := b.Load(ctx, plugins.LoadRequest{ModelPath: "/nonexistent"}); !errors.Is(err, plugins.ErrModelNotFound) {
		t.Errorf("Load of a missing model = %v, want ErrModelNotFound", err)
	}
	rep, err := b.Load(ctx, plugins.LoadRequest{ModelPath: testshared.Touch(t, "m.bin")})
	if err != nil || rep.TotalBytes != 1<<20 {
		t.Errorf("Load = %+v, %v; want TotalBytes filled in as 1 MiB", rep, err)
	}
	audio := filepath.Join(t.TempDir(), "a.wav")
	if err := os.WriteFile(audio, make([]byte, 1234), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := b.Transcribe(ctx, plugins.TranscribeRequest{AudioPath: audio}, nil)
	if err != nil || res.Text != "1234 bytes" || len(res.Segments) != 1 {
		t.Errorf("Transcribe = %+v, %v; want one segment \"1234 bytes\"", res, err)
	}
}
