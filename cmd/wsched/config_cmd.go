package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newConfigCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Inspect the configuration"}
	cmd.AddCommand(&cobra.Command{
		Use:   "check",
		Short: "Validate the configuration and print the effective values",
		Long: `Validate the configuration (--config, $WSCHED_CONFIG, or /etc/wsched/wsched.toml)
strictly and print the effective configuration: the file's values over the
defaults, with the environment overrides applied. Keys that were renamed
(the [backends] keys now in [jobs] and [models]) are still read; each is
reported with its new name.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			src := cfg.Source
			if src == "" {
				src = "built-in defaults (no config file)"
			}
			fmt.Fprintf(a.out, "# config OK: %s\n", src)
			for _, d := range cfg.Deprecations {
				fmt.Fprintf(a.out, "# deprecated: %s\n", d)
			}
			if cfg.DeviceVar != "" {
				fmt.Fprintf(a.out, "# device pin: %s (from %s)\n", cfg.Device, cfg.DeviceVar)
			}
			text, err := cfg.Encode()
			if err != nil {
				return err
			}
			_, err = a.out.Write(text)
			return err
		},
	})
	return cmd
}
