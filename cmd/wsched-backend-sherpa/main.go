// Command wsched-backend-sherpa is wsched's sherpa-onnx backend plugin
// (SenseVoice, Paraformer and Whisper ONNX models): the daemon starts it
// under a lease (CUDA_VISIBLE_DEVICES set to the lease's GPU) and talks to it
// over go-plugin gRPC. Run by hand it only says so: go-plugin refuses to
// serve without the host's handshake cookie.
//
// It links the sherpa-onnx and ONNX Runtime libraries that
// github.com/k2-fsa/sherpa-onnx-go-linux ships (found through the rpath
// into the Go module cache, or next to the binary); build with make plugins.
package main

import (
	"log/slog"
	"os"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/sherpa"
)

// version is set at build time (-X main.version=…).
var version = "dev"

func main() {
	// The logger takes the real stderr before Serve redirects os.Stderr; the
	// host parses what it writes there as log lines.
	log := plugins.NewLogger(os.Stderr, slog.LevelDebug)
	plugins.Serve(sherpa.New(sherpa.Options{Log: log, Version: version}))
}
