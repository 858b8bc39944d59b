package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/internal/config"
)

// app is the state shared by all commands: streams, environment and the
// global flags.
type app struct {
	streams
	lookupEnv  func(string) (string, bool)
	configPath string
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
	}
	root.PersistentFlags().StringVar(&a.configPath, "config", "", "config file (default $WSCHED_CONFIG, then "+config.DefaultPath+")")
	root.AddCommand(newGPUsCmd(a), newConfigCmd(a), newEstimateCmd(a))
	return root
}

func (a *app) getenv(k string) string {
	v, _ := a.lookupEnv(k)
	return v
}

// loadConfig reads the configuration named by --config / WSCHED_CONFIG.
func (a *app) loadConfig() (*config.Config, error) {
	return config.Load(config.Options{Path: a.configPath, LookupEnv: a.lookupEnv})
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
