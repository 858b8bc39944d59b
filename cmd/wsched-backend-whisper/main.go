//go:build whisper

// Command wsched-backend-whisper is wsched's whisper.cpp backend plugin: the
// daemon starts it under a lease (CUDA_VISIBLE_DEVICES set to the lease's GPU)
// and talks to it over go-plugin gRPC. Run by hand it only says so: go-plugin
// refuses to serve without the host's handshake cookie.
//
// Build with make plugins (it needs libwhisper: make deps).
package main

import (
	"log/slog"
	"os"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/whisper"
)

// version is set at build time (-X main.version=…).
var version = "dev"

func main() {
	// The logger takes the real stderr before Serve redirects os.Stderr; the
	// host parses what it writes there as log lines.
	log := plugins.NewLogger(os.Stderr, slog.LevelDebug)
	plugins.Serve(whisper.New(whisper.Options{Log: log, Version: version}))
}
