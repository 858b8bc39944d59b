// Command wsched-backend-exec is wsched's backend for existing transcription
// servers (a SenseVoice or FunASR Python service, say): the daemon starts it
// under a lease, and it starts the model entry's command with the lease's
// environment, forwards each job to the app over HTTP on loopback and stops
// the app's process group when the instance goes. Run by hand it only says
// so: go-plugin refuses to serve without the host's handshake cookie.
package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/execbackend"
)

// version is set at build time (-X main.version=…).
var version = "dev"

func main() {
	// The logger takes the real stderr before Serve redirects os.Stderr; the
	// host parses what it writes there as log lines.
	log := plugins.NewLogger(os.Stderr, slog.LevelDebug)
	b := execbackend.New(execbackend.Options{Log: log, Version: version})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		<-sig
		b.Close() // the app's process group goes with this process
		os.Exit(0)
	}()
	plugins.Serve(b)
	b.Close()
}
