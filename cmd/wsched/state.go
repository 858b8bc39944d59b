package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon/store"
)

func newStateCmd(a *app) *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Check or repair the daemon's state database (the daemon must be stopped)",
		Long: `The daemon keeps its leases in [daemon] state_dir: wsched.db (bbolt), the lease
journal leases.wal (and leases.wal.prev, the journal folded last) and
wsched.epoch, the commit sequence, journal generation and journal length checked
at start-up. Every journal record and stored lease carries a CRC-32C. A daemon
that finds the database damaged, empty, missing or older than wsched.epoch, a
journal missing, emptied, rolled back or corrupt (anything but a torn tail: the
error names the file and the offset), or a stored lease that fails its checksum
(the error names the key) refuses to start and changes nothing; these commands
read and rebuild the state with the daemon stopped. repair keeps every valid
journal record, on both sides of any damage.`,
	}
	cmd.PersistentFlags().StringVar(&dir, "state-dir", "", "state directory (default [daemon] state_dir)")
	stateDir := func() (string, error) {
		if dir != "" {
			return dir, nil
		}
		cfg, err := a.loadConfig()
		if err != nil {
			return "", err
		}
		return cfg.Daemon.StateDir, nil
	}
	check := &cobra.Command{
		Use:   "check",
		Short: "Report the leases, the commit sequence and any damage (read-only; exit 1 on problems)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			d, err := stateDir()
			if err != nil {
				return err
			}
			r, err := store.Check(d)
			if err != nil {
				return err
			}
			if asJSON {
				err = a.printJSON(r)
			} else {
				a.printReport(r)
			}
			if err == nil && len(r.Problems) > 0 {
				err = exitError{code: 1}
			}
			return err
		},
	}
	check.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	repair := &cobra.Command{
		Use:   "repair",
		Short: "Move the damaged files aside and rebuild the database from what is left and the lease journal",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			d, err := stateDir()
			if err != nil {
				return err
			}
			rep, err := store.Repair(d, time.Now())
			if err != nil {
				return err
			}
			for _, p := range rep.MovedAside {
				fmt.Fprintf(a.out, "moved aside: %s\n", p)
			}
			for _, l := range rep.Lost {
				fmt.Fprintf(a.out, "could not read: %s\n", l)
			}
			fmt.Fprintf(a.out, "rebuilt %s with %d leases (buckets copied: %v; %d valid journal records replayed, on both sides of any damage); commit epoch reset to 1\n",
				d, rep.Leases, rep.Buckets, rep.JournalRecords)
			fmt.Fprintln(a.out, "at start the daemon releases leases whose holders exited and marks those over a GPU's capacity")
			return nil
		},
	}
	cmd.AddCommand(check, repair)
	return cmd
}

func (a *app) printReport(r store.Report) {
	fmt.Fprintf(a.out, "state dir:  %s\n", r.Dir)
	fmt.Fprintf(a.out, "commit:     %d in the database, %d in %s\n", r.Seq, r.Epoch, store.EpochName)
	fmt.Fprintf(a.out, "journal:    %d records\n", r.JournalRecords)
	fmt.Fprintf(a.out, "leases:     %d\n", len(r.Leases))
	for _, l := range r.Leases {
		fmt.Fprintf(a.out, "  %s  %s  %s  %d bytes  pid %d\n", l.ID, l.State, l.GPU, l.Bytes, l.Holder.PID)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(a.out, "note:       %s\n", n)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(a.out, "PROBLEM:    %s\n", p)
	}
	if len(r.Problems) == 0 {
		fmt.Fprintln(a.out, "state OK")
	}
}
