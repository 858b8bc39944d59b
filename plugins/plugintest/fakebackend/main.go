// Command fakebackend is a TEST-ONLY wsched backend plugin: a plugintest.Fake
// served over go-plugin, scripted by WSCHED_FAKE_* environment variables (see
// package plugintest). Tests build it with plugintest.Build; it is never
// packaged.
package main

import (
	"log/slog"
	"os"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
)

func main() {
	// The logger captures the real stderr before Serve redirects os.Stderr;
	// the host parses what it writes there as log lines.
	log := plugins.NewLogger(os.Stderr, slog.LevelDebug)
	plugins.Serve(plugintest.NewFake(os.LookupEnv, log))
}
