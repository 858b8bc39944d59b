package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/config"
)

// app is the state shared by all commands: streams, environment and the
// global flags.
type app struct {
	streams
	lookupEnv  func(string) (string, bool)
	configPath string
	socket     string
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "wsched",
		Short: "GPU-memory placement for speech-to-text services",
		Long: `wsched leases GPU memory to transcription processes so they land on a GPU with
room for them, queue by priority when memory is short, and give it back when
they exit. Without a daemon, 'wsched gpus' shows the GPUs and which one wsched
would pick.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       readBuild().String(), // --version; `wsched version` adds the backends
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(&a.configPath, "config", "", "config file (default $WSCHED_CONFIG, then "+config.DefaultPath+")")
	root.PersistentFlags().StringVar(&a.socket, "socket", "", "daemon socket (default $WSCHED_SOCKET, then [daemon] socket)")
	root.AddCommand(newGPUsCmd(a), newConfigCmd(a), newServeCmd(a), newEstimateCmd(a))
	root.AddCommand(newLeaseCmd(a), newLeasesCmd(a), newReleaseCmd(a), newRenewCmd(a), newStatusCmd(a), newEventsCmd(a))
	root.AddCommand(newRunCmd(a), newBenchCmd(a))
	root.AddCommand(newTranscribeCmd(a), newJobsCmd(a), newJobCmd(a), newCancelCmd(a))
	root.AddCommand(newBackendsCmd(a), newTopCmd(a), newMonitorCmd(a))
	root.AddCommand(newModelsCmd(a))
	root.AddCommand(newK8sCmd(a), newStateCmd(a), newVersionCmd(a))
	root.AddCommand(newSimCmd(a))
	return root
}

func (a *app) getenv(k string) string {
	v, _ := a.lookupEnv(k)
	return v
}

// loadConfig reads the configuration named by --config / WSCHED_CONFIG;
// --socket wins over WSCHED_SOCKET and the file.
func (a *app) loadConfig() (*config.Config, error) {
	cfg, err := config.Load(config.Options{Path: a.configPath, LookupEnv: a.lookupEnv})
	if err != nil {
		return nil, err
	}
	if a.socket != "" {
		cfg.Daemon.Socket = a.socket
	}
	return cfg, nil
}

// client returns a daemon client for the configured socket. A user who
// configured none (no --socket, no WSCHED_SOCKET, [daemon] socket "") gets
// their own daemon's socket and then the system daemon's, which members of
// the socket group may use.
func (a *app) client() (*client.Client, *config.Config, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	if sockets := socketCandidates(cfg.Daemon.Socket, a.socket, a.getenv, os.Getuid()); len(sockets) > 1 {
		return client.Discover(cfg.Daemon.SocketGroup, sockets...), cfg, nil
	}
	return client.New(cfg.Daemon.Socket), cfg, nil
}

// socketCandidates lists the sockets a client of uid tries: resolved (the
// configuration's socket), or when none was configured — no --socket flag,
// no WSCHED_SOCKET, and the file's socket resolved to the per-user default —
// that default and then client.SystemSocket. (Naming the per-user path in
// the file does the same: the system socket is only tried when it has no
// daemon.) Root's default is the system socket already.
func socketCandidates(resolved, flag string, getenv func(string) string, uid int) []string {
	if flag != "" || getenv("WSCHED_SOCKET") != "" || uid == 0 || resolved == client.SystemSocket ||
		resolved != config.DefaultSocket(false, getenv("XDG_RUNTIME_DIR")) {
		return []string{resolved}
	}
	return []string{resolved, client.SystemSocket}
}

// printJSON writes v indented.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// logger returns a text logger on stderr at the configured level.
func (a *app) logger(cfg *config.Config) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(strings.ToUpper(string(cfg.Daemon.LogLevel))))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Daemon.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(a.err, opts))
	}
	return slog.New(slog.NewTextHandler(a.err, opts))
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
