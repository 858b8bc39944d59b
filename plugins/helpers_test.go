package plugins_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
)

// fake returns a plugintest.Fake whose environment is env, keyed by
// variable name (use plugintest.Env for settings).
func fake(env map[string]string) *plugintest.Fake {
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	return plugintest.NewFake(lookup, slog.New(slog.DiscardHandler))
}

// loaded returns a connected fake with a model loaded.
func loaded(t *testing.T, env map[string]string) plugins.Backend {
	t.Helper()
	b := plugintest.Connect(t, fake(env))
	if _, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: testshared.Touch(t, "model.bin"), Device: "cpu"}); err != nil {
		t.Fatal(err)
	}
	return b
}

// stub is a Backend made of functions; nil ones succeed with zero values.
type stub struct {
	info       func(context.Context) (plugins.Info, error)
	load       func(context.Context, plugins.LoadRequest) (plugins.MemoryReport, error)
	transcribe func(context.Context, plugins.TranscribeRequest, func(plugins.Event) error) (plugins.Result, error)
	unload     func(context.Context) error
	health     func(context.Context) error
}

var _ plugins.Backend = (*stub)(nil)

func (s *stub) Info(ctx context.Context) (plugins.Info, error) {
	if s.info == nil {
		return plugins.Info{}, nil
	}
	return s.info(ctx)
}

func (s *stub) Load(ctx context.Context, req plugins.LoadRequest) (plugins.MemoryReport, error) {
	if s.load == nil {
		return plugins.MemoryReport{}, nil
	}
	return s.load(ctx, req)
}

func (s *stub) Transcribe(ctx context.Context, req plugins.TranscribeRequest, emit func(plugins.Event) error) (plugins.Result, error) {
	if s.transcribe == nil {
		return plugins.Result{}, nil
	}
	return s.transcribe(ctx, req, emit)
}

func (s *stub) Unload(ctx context.Context) error {
	if s.unload == nil {
		return nil
	}
	return s.unload(ctx)
}

func (s *stub) Health(ctx context.Context) error {
	if s.health == nil {
		return nil
	}
	return s.health(ctx)
}
