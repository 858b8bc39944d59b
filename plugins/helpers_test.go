package plugins_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
)

// connect serves impl and returns the host's view of it over a real gRPC
// connection (a Unix socket), as the daemon would see it.
func connect(t *testing.T, impl plugins.Backend) plugins.Backend {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, plugins.PluginSet(impl))
	t.Cleanup(func() {
		// Stop the server first: client.Close asks the server to stop itself,
		// and go-plugin's GRPCServer.Stop is not safe to call twice at once.
		server.Stop()
		_ = client.Close()
	})
	b, err := plugins.Dispense(client)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fake returns a plugintest.Fake whose environment is env, keyed by
// variable name (use plugintest.Env for settings).
func fake(env map[string]string) *plugintest.Fake {
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	return plugintest.NewFake(lookup, slog.New(slog.DiscardHandler))
}

// touch creates an empty file and returns its path.
func touch(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// loaded returns a connected fake with a model loaded.
func loaded(t *testing.T, env map[string]string) plugins.Backend {
	t.Helper()
	b := connect(t, fake(env))
	if _, err := b.Load(t.Context(), plugins.LoadRequest{ModelPath: touch(t, "model.bin"), Device: "cpu"}); err != nil {
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
