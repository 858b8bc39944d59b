package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
)

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// describe is a one-line account of a lease for people.
func describe(l api.Lease) string {
	where := "the CPU"
	if l.GPUIndex >= 0 {
		where = fmt.Sprintf("GPU %d (%s, %s)", l.GPUIndex, l.GPUName, l.GPUUUID)
	}
	switch l.State {
	case "granted":
		left := ""
		if l.Expires != nil {
			left = fmt.Sprintf(", expires in %s unless renewed", time.Until(*l.Expires).Round(time.Second))
		}
		return fmt.Sprintf("lease %s granted: %s on %s%s", l.ID, units.FormatBytes(l.MemoryBytes), where, left)
	case "queued":
		return fmt.Sprintf("request %s queued: %s, priority %s", l.ID, units.FormatBytes(l.MemoryBytes), l.Priority)
	}
	return fmt.Sprintf("lease %s %s: %s", l.ID, l.State, l.Reason)
}

func newLeaseCmd(a *app) *cobra.Command {
	var f leaseFlags
	var asJSON, hold bool
	cmd := &cobra.Command{
		Use:   "lease",
		Short: "Lease GPU memory and print the environment that pins a process to it",
		Long: `Ask the daemon for GPU memory. The export lines go to stdout (eval them), the
description to stderr. Without --hold the lease belongs to the parent process (your
shell; when wsched runs in a command substitution, eval "$(wsched lease …)", the shell
that forked the substitution's subshell) and ends when it exits or its TTL passes
without 'wsched renew'; with --hold
wsched keeps and renews the lease until interrupted, then releases it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := f.request()
			if err != nil {
				return err
			}
			if req.Holder == nil && !hold {
				pid := shellHolder("/proc", os.Getppid())
				if pid != os.Getppid() {
					fmt.Fprintf(a.err, "wsched: the lease belongs to pid %d (your shell), not to the command substitution's subshell (pid %d)\n", pid, os.Getppid())
				}
				req.Holder = &api.HolderRequest{PID: pid}
			}
			c, _, err := a.client()
			if err != nil {
				return err
			}
			if req.Device == "" {
				if req.Device, err = a.envDevice(); err != nil {
					return err
				}
			}
			l, err := acquireSurviving(cmd.Context(), c, req, a.err)
			if err != nil {
				return err
			}
			if asJSON {
				err = a.printJSON(l)
			} else {
				fmt.Fprintln(a.err, describe(l))
				_, err = fmt.Fprint(a.out, exportLines(l.Env))
			}
			if err != nil || !hold {
				return err
			}
			return holdLease(cmd.Context(), newKeeper(c, l, req, false, a.err), a.err)
		},
	}
	f.register(cmd.Flags(), 0)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the lease as JSON (the API's lease object)")
	cmd.Flags().BoolVar(&hold, "hold", false, "keep and renew the lease until interrupted, then release it")
	return cmd
}

// getenvDevice is the device pin from WSCHED_DEVICE / SENSEVOICE_DEVICE, as
// text ("" when unset); the daemon validates it.
func (a *app) getenvDevice() string {
	if v := a.getenv("WSCHED_DEVICE"); v != "" {
		return v
	}
	return a.getenv("SENSEVOICE_DEVICE")
}

// envDevice is the device pin from WSCHED_DEVICE / SENSEVOICE_DEVICE as
// the machine names it ("" when unset): inside a lease, the cuda:N the
// lease exported is its GPU, and a pin the environment contradicts is an
// error saying why.
func (a *app) envDevice() (string, error) {
	pin, err := device.PinFromEnv(a.lookupEnv)
	if err != nil {
		return "", fmt.Errorf("device pin: %w", err)
	}
	if pin.Var == "" {
		return "", nil
	}
	if pin.Relative {
		fmt.Fprintf(a.err, "wsched: %s=%s inside lease %s is GPU %s (CUDA_VISIBLE_DEVICES)\n", pin.Var, pin.Raw, pin.Lease, pin.Spec)
	}
	return pin.Spec.String(), nil
}

// holdLease keeps k's lease (renewed; re-acquired if the daemon loses it)
// until ctx ends, then releases it.
func holdLease(ctx context.Context, k *keeper, log interface{ Write([]byte) (int, error) }) error {
	k.Run(ctx)
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := k.release(rctx)
	if err != nil {
		return fmt.Errorf("release %s: %w", k.Lease().ID, err)
	}
	fmt.Fprintf(log, "lease %s released\n", l.ID)
	return nil
}

func newLeasesCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "leases",
		Short: "List granted leases and queued requests",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			ls, err := c.Leases(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(ls)
			}
			return renderLeases(a, ls)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's lease objects")
	return cmd
}

func renderLeases(a *app, ls []api.Lease) error {
	if len(ls) == 0 {
		_, err := fmt.Fprintln(a.out, "no leases")
		return err
	}
	t := &table{header: []string{"ID", "STATE", "GPU", "MEMORY", "USED", "PRIORITY", "HOLDER", "EXPIRES"}, right: map[int]bool{3: true, 4: true}}
	for _, l := range ls {
		gpu := "cpu"
		if l.GPUIndex >= 0 {
			gpu = fmt.Sprint(l.GPUIndex)
		} else if l.State == "queued" {
			gpu = "-"
		}
		exp := "-"
		if l.Expires != nil {
			exp = time.Until(*l.Expires).Round(time.Second).String()
		}
		holder := fmt.Sprintf("%d %s (uid %d)", l.Holder.PID, l.Holder.Name, l.Holder.UID)
		t.add([]string{l.ID, l.State, gpu, units.FormatBytes(l.MemoryBytes), units.FormatBytes(l.UsedBytes), l.Priority, holder, exp})
	}
	return t.render(a.out, "")
}

func newReleaseCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "release ID...",
		Short: "Release leases (or cancel queued requests)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			var out []api.Lease
			for _, id := range ids {
				l, err := c.Release(cmd.Context(), id)
				if err != nil {
					return fmt.Errorf("release %s: %w", id, err)
				}
				out = append(out, l)
				if !asJSON {
					fmt.Fprintf(a.out, "%s %s\n", l.ID, l.State)
				}
			}
			if asJSON {
				return a.printJSON(out)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's lease objects")
	return cmd
}

func newRenewCmd(a *app) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "renew ID",
		Short: "Extend a lease's time to live",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			l, err := c.Renew(cmd.Context(), args[0], ttl)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.out, describe(l))
			return err
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "new time to live (default: the lease's own)")
	return cmd
}

func newEventsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Follow the daemon's placement events",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			lines := json.NewEncoder(a.out) // JSON Lines: one compact object a line
			err = c.Events(cmd.Context(), func(ev api.Event) error {
				if asJSON {
					return lines.Encode(ev)
				}
				_, err := fmt.Fprintln(a.out, eventLine(ev))
				return err
			})
			if cmd.Context().Err() != nil {
				return nil
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print events as JSON Lines (one compact object a line)")
	return cmd
}

func eventLine(ev api.Event) string {
	gpu := ""
	if ev.Lease.GPUIndex >= 0 {
		gpu = fmt.Sprintf(" gpu %d", ev.Lease.GPUIndex)
	}
	line := fmt.Sprintf("%s %-9s %s %s%s holder %d", ev.Time.Format("15:04:05.000"), ev.Type, ev.Lease.ID,
		units.FormatBytes(ev.Lease.MemoryBytes), gpu, ev.Lease.Holder.PID)
	if ev.Reason != "" {
		line += ": " + ev.Reason
	}
	return strings.TrimSpace(line)
}
