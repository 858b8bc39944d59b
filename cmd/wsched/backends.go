package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/plugins/host"
)

func newBackendsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "backends",
		Short: "List the transcription backends the daemon found, and its warm instances",
		Long: `Ask the daemon which backend executables (wsched-backend-NAME in [backends]
plugin_dir and dev_dirs) it found, with the version, model formats and devices
each reports; which files it refused and why; and the backends it keeps warm:
model, GPU, lease, process, state and idle time. 'wsched backends check PATH'
tries one binary without a daemon.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			b, err := c.Backends(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(b)
			}
			return renderBackends(a.out, b)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	cmd.AddCommand(newBackendsCheckCmd(a))
	return cmd
}

func newBackendsCheckCmd(a *app) *cobra.Command {
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check PATH",
		Short: "Run go-plugin's handshake and Info against a backend binary (no daemon needed)",
		Long: `Start the binary as the daemon would (go-plugin handshake with AutoMTLS, but no
lease: CUDA_VISIBLE_DEVICES is empty), ask for its Info and stop it. Also says
whether the daemon, running as the current user, would refuse the file (name,
owner, mode). Fails when the handshake or Info fails or the file would be refused.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if timeout <= 0 {
				timeout = cfg.Backends.StartTimeout.D()
			}
			res, err := host.Check(cmd.Context(), args[0], a.logger(cfg), timeout)
			if err != nil {
				return err
			}
			if asJSON {
				err = a.printJSON(res)
			} else {
				err = renderCheck(a.out, res)
			}
			if err == nil && res.Refusal != "" {
				err = fmt.Errorf("the daemon would refuse %s: %s", res.Path, res.Refusal)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "start-up limit (default [backends] start_timeout)")
	return cmd
}

func renderCheck(w io.Writer, r host.CheckResult) error {
	i := r.Info
	fmt.Fprintf(w, "path:       %s\n", r.Path)
	fmt.Fprintf(w, "backend:    %s %s\n", i.Name, i.Version)
	fmt.Fprintf(w, "formats:    %s\n", orDash(strings.Join(i.ModelFormats, ", ")))
	fmt.Fprintf(w, "devices:    %s\n", orDash(strings.Join(i.Devices, ", ")))
	fmt.Fprintf(w, "handshake:  ok (go-plugin, gRPC, AutoMTLS), start-up and Info in %s\n", r.Startup.Round(time.Millisecond))
	for _, k := range sortedKeys(i.Metadata) {
		fmt.Fprintf(w, "metadata:   %s=%s\n", k, i.Metadata[k])
	}
	if !i.Descriptor.IsZero() {
		for _, n := range describeNotes(i.Descriptor) {
			fmt.Fprintf(w, "describes:  %s\n", n)
		}
	} else {
		fmt.Fprintf(w, "describes:  nothing (no descriptor): its models need [[models.model]] entries with memory\n")
	}
	if r.Name != "" && i.Name != r.Name {
		fmt.Fprintf(w, "warning:    the file is named for backend %q but the backend calls itself %q\n", r.Name, i.Name)
	}
	verdict := "accepted"
	if r.Refusal != "" {
		verdict = "refused: " + r.Refusal
	}
	_, err := fmt.Fprintf(w, "discovery:  %s\n", verdict)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func renderBackends(w io.Writer, b api.Backends) error {
	fmt.Fprintf(w, "Backend directories: %s\n\n", strings.Join(b.Dirs, ", "))
	if len(b.Backends) == 0 {
		fmt.Fprintln(w, "no backends found")
	} else {
		t := &table{header: []string{"NAME", "VERSION", "FORMATS", "DEVICES", "PATH"}}
		for _, be := range b.Backends {
			var notes []string
			if be.Error != "" {
				notes = append(notes, "! "+be.Error)
			}
			if be.Descriptor != nil {
				notes = append(notes, describeNotes(*be.Descriptor)...)
			}
			t.add([]string{be.Name, orDash(be.Version), orDash(strings.Join(be.ModelFormats, ",")), orDash(strings.Join(be.Devices, ",")), be.Path}, notes...)
		}
		if err := t.render(w, "  "); err != nil {
			return err
		}
	}
	if len(b.Refused) > 0 {
		fmt.Fprintln(w, "\nRefused:")
		for _, r := range b.Refused {
			fmt.Fprintf(w, "  %s: %s\n", r.Path, r.Reason)
		}
	}
	fmt.Fprintln(w)
	if len(b.Instances) == 0 {
		_, err := fmt.Fprintln(w, "no warm instances")
		return err
	}
	fmt.Fprintln(w, "Instances:")
	t := &table{
		header: []string{"ID", "BACKEND", "MODEL", "GPU", "LEASE", "PID", "STATE", "STREAMS", "MEMORY", "REPORTED", "IDLE", "KEEP-ALIVE", "RESTARTS"},
		right:  map[int]bool{3: true, 5: true, 7: true, 8: true, 9: true, 10: true, 11: true, 12: true},
	}
	for _, i := range b.Instances {
		gpu, idle, keep := "cpu", "-", "none"
		if i.GPUIndex >= 0 {
			gpu = fmt.Sprint(i.GPUIndex)
		}
		if i.State == "idle" {
			idle = seconds(i.IdleSeconds).Round(time.Second).String()
		}
		if i.KeepAliveSeconds >= 0 {
			keep = seconds(i.KeepAliveSeconds).String()
		}
		var notes []string
		if i.Failed != "" {
			notes = append(notes, "! "+i.Failed)
		}
		streams := fmt.Sprintf("%d/%d", i.Streams, max(i.MaxStreams, 1)) // now / most it takes (issue 26)
		t.add([]string{i.ID, i.Backend, i.Model, gpu, i.Lease, fmt.Sprint(i.PID), i.State, streams, units.FormatBytes(i.MemoryBytes),
			units.FormatBytes(i.ReportedBytes), idle, keep, fmt.Sprint(i.Restarts)}, notes...)
	}
	return t.render(w, "  ")
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
