package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/units"
)

func newStatusCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the daemon, its GPUs with their accounting, and the queue",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			st, err := c.Status(cmd.Context())
			if err != nil {
				return err
			}
			gpus, err := c.GPUs(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(map[string]any{"status": st, "gpus": gpus})
			}
			return renderStatus(a, st, gpus)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: {status, gpus}")
	return cmd
}

func renderStatus(a *app, st api.Status, g api.GPUs) error {
	act := ""
	if st.SocketActivated {
		act = ", socket-activated"
	}
	fmt.Fprintf(a.out, "wsched %s, pid %d, up %s, socket %s%s\n", st.Version, st.PID, time.Since(st.Started).Round(time.Second), st.Socket, act)
	fmt.Fprintf(a.out, "provider %s, policy %s: %d GPUs, %d leases (%s), %d queued (high %d, normal %d, low %d)\n",
		st.Provider, st.Policy, st.GPUs, st.Leases, units.FormatBytes(st.LeasedBytes), st.QueueLength,
		st.QueueByPrio["high"], st.QueueByPrio["normal"], st.QueueByPrio["low"])
	fmt.Fprintf(a.out, "since start: %d requests, %d grants, %d rejections, %d releases, %d expiries, %d overruns\n\n",
		st.Stats.Requests, st.Stats.Grants, st.Stats.Rejections, st.Stats.Releases, st.Stats.Expiries, st.Stats.Overruns)
	if len(g.GPUs) > 0 {
		t := &table{header: []string{"GPU", "NAME", "TOTAL", "USABLE", "FOREIGN", "LEASED", "AVAILABLE", "LEASES"},
			right: map[int]bool{0: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true}}
		for _, gpu := range g.GPUs {
			acc := gpu.Accounting
			var notes []string
			if !acc.Placeable {
				notes = append(notes, "! "+acc.Reason)
			}
			if e := gpu.Enforcement; e != nil {
				notes = append(notes, enforcementNote(e.Tier, e.Reason))
			}
			if gpu.HeldBytes > 0 {
				notes = append(notes, fmt.Sprintf("%s of the available memory is held for the queue head", units.FormatBytes(gpu.HeldBytes)))
			}
			t.add([]string{fmt.Sprint(gpu.Index), gpu.Name, units.FormatBytes(acc.TotalBytes), units.FormatBytes(acc.UsableBytes),
				units.FormatBytes(acc.ForeignBytes), units.FormatBytes(acc.LeasedBytes), units.FormatBytes(acc.AvailableOrZero()),
				fmt.Sprint(len(gpu.Leases))}, notes...)
		}
		if err := t.render(a.out, "    "); err != nil {
			return err
		}
	}
	held := map[string]api.Hold{}
	for _, h := range g.Held {
		held[h.LeaseID] = h
	}
	for _, q := range g.Queue {
		note := ""
		if h, ok := held[q.ID]; ok {
			note = fmt.Sprintf(", %s held for it on GPU %d", units.FormatBytes(h.Bytes), h.GPUIndex)
		}
		fmt.Fprintf(a.out, "queued: %s %s priority %s, waiting %s%s\n", q.ID, units.FormatBytes(q.MemoryBytes), q.Priority, time.Since(q.Created).Round(time.Second), note)
	}
	if len(g.UIDs) > 0 {
		fmt.Fprintf(a.out, "\nper uid: recent use (GiB·s, decayed; USE: part of all) next to fair share\n")
	}
	return uidTable(a.out, "    ", g.UIDs)
}
