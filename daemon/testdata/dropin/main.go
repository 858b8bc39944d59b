// Command dropin is a transcription backend written the way an out-of-tree
// one would be: it imports only wsched's backend SDK (plugins and its
// descriptor package), and the daemon serves its models without a line of
// its own changed for it (daemon/dropin_test.go, docs/writing-a-backend.md).
//
// Its "models" are text files NAME.echo; transcribing any audio file
// answers the model's text. Built as wsched-backend-echo it says it can use
// the CPU and CUDA; built under a name ending in "cpu" it says this build
// runs on the CPU only, so the daemon places it there.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/descriptor"
)

func main() {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), "wsched-backend-")
	devices := []string{descriptor.DeviceCPU, descriptor.DeviceCUDA}
	if strings.HasSuffix(name, "cpu") {
		devices = devices[:1]
	}
	plugins.Serve(&echo{name: name, devices: devices})
}

// echo is the backend: one loaded model at a time.
type echo struct {
	name    string
	devices []string

	mu    sync.Mutex
	text  string            // the loaded model's text
	extra map[string]string // its options
}

// Info describes the backend; the descriptor is all the daemon needs.
func (e *echo) Info(context.Context) (plugins.Info, error) {
	return plugins.Info{
		Name: e.name, Version: "1.0.0", ModelFormats: []string{"echo"}, Devices: e.devices,
		Descriptor: descriptor.Descriptor{
			Name:    e.name,
			Formats: []string{"echo"},
			// models_dir/NAME.echo is model NAME.
			Layouts: []descriptor.Layout{{Kind: descriptor.LayoutFile, Suffix: ".echo"}},
			// No estimator profile knows it: a lease of 1 GiB plus twice
			// the model file.
			Memory: &descriptor.MemoryRule{BaseBytes: 1 << 30, PerModelByte: 2},
			Options: []descriptor.Option{
				{Name: "shout", Type: descriptor.TypeBool, Default: "false", Help: "upper-case the transcript"},
				{Name: "prefix", Type: descriptor.TypeString, Help: "put before the transcript"},
			},
		},
	}, nil
}

// Load reads the model file; its options arrive in Extra.
func (e *echo) Load(_ context.Context, req plugins.LoadRequest) (plugins.MemoryReport, error) {
	b, err := os.ReadFile(req.ModelPath)
	if err != nil {
		return plugins.MemoryReport{}, fmt.Errorf("%w: %w", plugins.ErrModelNotFound, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.text, e.extra = strings.TrimSpace(string(b)), req.Extra
	return plugins.MemoryReport{ModelBytes: int64(len(b))}, nil
}

// Transcribe answers the model's text for any readable audio file.
func (e *echo) Transcribe(_ context.Context, req plugins.TranscribeRequest, emit func(plugins.Event) error) (plugins.Result, error) {
	if _, err := os.Stat(req.AudioPath); err != nil {
		return plugins.Result{}, fmt.Errorf("%w: %w", plugins.ErrBadAudio, err)
	}
	e.mu.Lock()
	text, extra := e.text, e.extra
	e.mu.Unlock()
	if extra["shout"] == "true" {
		text = strings.ToUpper(text)
	}
	text = extra["prefix"] + text
	seg := plugins.Segment{End: time.Second, Text: text}
	if err := emit(plugins.SegmentEvent(seg)); err != nil {
		return plugins.Result{}, err
	}
	return plugins.Result{Language: "en", Duration: time.Second, Text: text, Segments: []plugins.Segment{seg}}, nil
}

// Unload forgets the model.
func (e *echo) Unload(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.text, e.extra = "", nil
	return nil
}

// Health is always fine.
func (e *echo) Health(context.Context) error { return nil }
