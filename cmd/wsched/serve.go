package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon"
)

// version is set at build time: -ldflags "-X main.version=…".
var version = "dev"

func newServeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the placement daemon (systemd: wsched.service)",
		Long: `Serve the placement API on the Unix socket ([daemon] socket, or the socket systemd
passes by activation). Leases persist in [daemon] state_dir and are restored on
restart when their holders still live. SIGTERM shuts down gracefully.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			log := a.logger(cfg)
			for _, d := range cfg.Deprecations {
				log.Warn("deprecated config key: its value was applied to the new key", "old", d.Old, "new", d.New, "file", d.File, "line", d.Line)
			}
			if path := os.Getenv("WSCHED_CPUPROFILE"); path != "" {
				stop, err := startCPUProfile(path)
				if err != nil {
					return err
				}
				defer stop()
			}
			noFsync := os.Getenv(unsafeNoFsyncEnv) == "1"
			if noFsync {
				log.Warn("lease journal fsync is off (" + unsafeNoFsyncEnv + "=1): a crash can forget granted leases; for measurements only")
			}
			d, err := daemon.New(daemon.Options{Config: cfg, Log: log, Version: version, UnsafeNoFsync: noFsync})
			if err != nil {
				return err
			}
			return d.Run(cmd.Context())
		},
	}
}

// unsafeNoFsyncEnv turns off the lease journal's fsync (wsched bench lease
// --unsafe-no-fsync: the lease path without the disk, as a baseline).
const unsafeNoFsyncEnv = "WSCHED_UNSAFE_NO_FSYNC"

// startCPUProfile writes a CPU profile of the daemon to path until the
// returned function is called (WSCHED_CPUPROFILE: for measuring the
// lease path, see README "Benchmarks").
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}
