package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// gpusView is what `wsched gpus` shows, and its --json output.
type gpusView struct {
	Taken time.Time `json:"taken"`
	// Source is "daemon" (the daemon's view: leases and the memory held
	// for waiting requests counted) or "local" (a reading of its own).
	Source string `json:"source"`
	// Note says where the view comes from, for people.
	Note           string         `json:"note"`
	Provider       string         `json:"provider"`
	Driver         string         `json:"driver,omitempty"`
	Policy         string         `json:"policy"`
	GPUs           []gpuView      `json:"gpus"`
	Recommendation recommendation `json:"recommendation"`
}

type gpuView struct {
	inventory.GPU
	// DriverBytes is the memory used by no process: the driver's idle
	// reservation (480 MiB on an H100), shown as driver rather than as a
	// foreign process. The accounting formula still counts it in
	// foreign_bytes, and [placement] reserved is on top of it. 0 when a
	// process's usage is unknown.
	DriverBytes int64             `json:"driver_bytes"`
	Accounting  placement.Account `json:"accounting"`
	// Leases is the number of leases granted on the GPU and HeldBytes the
	// memory held there for waiting requests (the daemon's view only).
	Leases    int   `json:"leases"`
	HeldBytes int64 `json:"held_bytes"`
}

// availableNow is what a new request can get on g: available memory less
// the memory held for waiting requests.
func (g gpuView) availableNow() int64 {
	return max(0, g.Accounting.AvailableOrZero()-g.HeldBytes)
}

// driverBytes is g's memory used by no process, or 0 when a process's
// usage is unknown.
func driverBytes(g inventory.GPU) int64 {
	procs := int64(0)
	for _, p := range g.Processes {
		if p.UsedUnknown {
			return 0
		}
		procs += p.UsedBytes
	}
	return max(0, g.UsedBytes-procs)
}

// recommendation names the device wsched would pick now for the default
// policy, or the pinned one.
type recommendation struct {
	Device         string `json:"device"`
	Index          *int   `json:"index,omitempty"`
	UUID           string `json:"uuid,omitempty"`
	Name           string `json:"name,omitempty"`
	AvailableBytes int64  `json:"available_bytes"`
	Export         string `json:"export"`
	Reason         string `json:"reason"`
	Warning        string `json:"warning,omitempty"`
}

func newGPUsCmd(a *app) *cobra.Command {
	var asJSON, noDaemon bool
	var watch time.Duration
	cmd := &cobra.Command{
		Use:   "gpus",
		Short: "Show GPUs, their memory and processes, and the GPU wsched would pick",
		Long: `Show memory, utilization, temperature and compute processes per GPU, the
available memory by wsched's accounting formula, and the GPU a new lease would
get, with the SENSEVOICE_DEVICE line to export. When a daemon answers, this is
its view: its inventory and provider, the leases on each GPU and the memory
held for waiting requests, and the GPU it would place on. Otherwise (or with
--no-daemon) the GPUs are read directly and the view says it is local: the
provider comes from the config ([inventory] provider), so --config
testdata/sim-8x4090.toml shows a simulated 8-GPU machine. Inside a lease
(WSCHED_LEASE_ID set) the lease's SENSEVOICE_DEVICE=cuda:0 names the leased GPU.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			pin, err := device.PinFromEnv(a.lookupEnv)
			if err != nil {
				return err
			}
			cfg.Device, cfg.DeviceVar = pin.Spec, pin.Var
			log := a.logger(cfg)
			local := &localGPUs{cfg: cfg, log: log}
			defer local.close()
			show := func(ctx context.Context) error { return a.showGPUs(ctx, cfg, pin, local, noDaemon, asJSON) }
			if watch > 0 {
				return a.watchGPUs(cmd.Context(), watch, show, log)
			}
			return show(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&noDaemon, "no-daemon", false, "read the GPUs directly, without asking a running daemon (no leases counted)")
	cmd.Flags().DurationVar(&watch, "watch", 0, "refresh every interval until interrupted (--watch means 2s)")
	cmd.Flags().Lookup("watch").NoOptDefVal = "2s"
	return cmd
}

func (a *app) showGPUs(ctx context.Context, cfg *config.Config, pin device.Pin, local *localGPUs, noDaemon, asJSON bool) error {
	v, err := a.gpusNow(ctx, cfg, pin, local, noDaemon)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(a.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	color := isTerminal(a.out) && a.getenv("NO_COLOR") == ""
	return renderGPUs(a.out, v, color)
}

// watchGPUs redraws every interval until ctx ends. On a terminal it redraws
// in place; otherwise it appends readings separated by a blank line.
func (a *app) watchGPUs(ctx context.Context, every time.Duration, show func(context.Context) error, log *slog.Logger) error {
	tty := isTerminal(a.out)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if tty {
			fmt.Fprint(a.out, "\x1b[H\x1b[2J")
		}
		if err := show(ctx); err != nil {
			log.Warn("GPU reading failed", "err", err)
		}
		if !tty {
			fmt.Fprintln(a.out)
		}
		t.Reset(every)
	}
}

func buildGPUsView(cfg *config.Config, snap inventory.Snapshot) gpusView {
	v := gpusView{Taken: snap.Taken, Provider: snap.Provider, Driver: snap.Driver, Policy: string(cfg.Placement.Policy), GPUs: []gpuView{}}
	accounts := make([]placement.Account, 0, len(snap.GPUs))
	for _, g := range snap.GPUs {
		acc := placement.Accounting(g, cfg.Placement, nil)
		accounts = append(accounts, acc)
		v.GPUs = append(v.GPUs, gpuView{GPU: g, DriverBytes: driverBytes(g), Accounting: acc})
	}
	v.Recommendation = recommend(cfg, accounts)
	return v
}

// recommend picks the device for the default policy, honouring a device pin
// from WSCHED_DEVICE / SENSEVOICE_DEVICE.
func recommend(cfg *config.Config, accounts []placement.Account) recommendation {
	if cfg.Device.Kind == device.CPU {
		return cpuRecommendation(cfg.DeviceVar + "=cpu pins the CPU")
	}
	if cfg.Device.IsPinned() {
		for _, acc := range accounts {
			if (cfg.Device.Kind == device.Index && acc.Index == cfg.Device.Index) || acc.UUID == cfg.Device.UUID {
				return gpuRecommendation(cfg, acc, fmt.Sprintf("pinned by %s=%s", cfg.DeviceVar, cfg.Device))
			}
		}
		return recommendation{Device: cfg.Device.String(), Reason: fmt.Sprintf("pinned by %s=%s", cfg.DeviceVar, cfg.Device),
			Warning: "no such GPU on this machine", Export: "export SENSEVOICE_DEVICE=" + cfg.Device.String()}
	}
	if len(accounts) == 0 {
		return cpuRecommendation("no GPUs found")
	}
	acc, ok := placement.Pick(cfg.Placement.Policy, cfg.Placement.Score, accounts, 0, placement.Normal)
	if !ok {
		return cpuRecommendation("no GPU has memory available")
	}
	return gpuRecommendation(cfg, acc, policyReason(cfg.Placement.Policy))
}

func policyReason(p placement.Policy) string {
	switch p {
	case placement.PolicyBinpack:
		return "least available memory (policy binpack)"
	case placement.PolicyScore:
		return "highest score (policy score)"
	}
	return "most available memory (policy spread)"
}

func cpuRecommendation(reason string) recommendation {
	return recommendation{Device: "cpu", Export: "export SENSEVOICE_DEVICE=cpu", Reason: reason}
}

func gpuRecommendation(cfg *config.Config, acc placement.Account, reason string) recommendation {
	idx := acc.Index
	r := recommendation{
		Device: fmt.Sprintf("cuda:%d", idx), Index: &idx, UUID: acc.UUID, Name: acc.Name,
		AvailableBytes: acc.AvailableOrZero(), Export: fmt.Sprintf("export SENSEVOICE_DEVICE=cuda:%d", idx), Reason: reason,
	}
	if !acc.Placeable {
		r.Warning = acc.Reason
	} else if acc.AvailableBytes < int64(cfg.Placement.MinFreeWarn) {
		r.Warning = fmt.Sprintf("only %s available, below min_free_warn (%s)", units.FormatBytes(acc.AvailableOrZero()), cfg.Placement.MinFreeWarn)
	}
	return r
}

// Status markers by memory use: below 50 %, below 80 %, above.
func marker(usedPct float64, healthy, color bool) string {
	type m struct{ ansi, plain string }
	var k m
	switch {
	case !healthy:
		k = m{"\x1b[35m●\x1b[0m", "[bad]"}
	case usedPct >= 80:
		k = m{"\x1b[31m●\x1b[0m", "[full]"}
	case usedPct >= 50:
		k = m{"\x1b[33m●\x1b[0m", "[busy]"}
	default:
		k = m{"\x1b[32m●\x1b[0m", "[ok]"}
	}
	if color {
		return k.ansi
	}
	return k.plain
}

func renderGPUs(w io.Writer, v gpusView, color bool) error {
	fmt.Fprintf(w, "%d GPU(s), provider %s", len(v.GPUs), v.Provider)
	if v.Driver != "" {
		fmt.Fprintf(w, ", driver %s", v.Driver)
	}
	fmt.Fprintf(w, ", read %s\n", v.Taken.Format("2006-01-02 15:04:05"))
	fmt.Fprintf(w, "%s\n\n", v.Note)
	if len(v.GPUs) > 0 {
		t := &table{
			header: []string{"", "GPU", "NAME", "TOTAL", "USED", "FREE", "AVAILABLE", "USE%", "TEMP", "UTIL", "PROCS"},
			right:  map[int]bool{1: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true, 10: true},
		}
		for _, g := range v.GPUs {
			t.add(gpuRow(g, color), gpuNotes(g)...)
		}
		if err := t.render(w, "           "); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	r := v.Recommendation
	if r.Index != nil {
		fmt.Fprintf(w, "Recommended: GPU %d (%s), %s available: %s\n", *r.Index, r.Name, units.FormatBytes(r.AvailableBytes), r.Reason)
	} else {
		fmt.Fprintf(w, "Recommended: %s: %s\n", r.Device, r.Reason)
	}
	if r.Warning != "" {
		fmt.Fprintf(w, "Warning: %s\n", r.Warning)
	}
	_, err := fmt.Fprintf(w, "  %s\n", r.Export)
	return err
}

func gpuRow(g gpuView, color bool) []string {
	opt := func(p *int, unit string) string {
		if p == nil {
			return "n/a"
		}
		return fmt.Sprintf("%d%s", *p, unit)
	}
	return []string{
		marker(g.UsedPct(), g.IsHealthy(), color), fmt.Sprint(g.Index), g.Name,
		units.FormatBytes(g.TotalBytes), units.FormatBytes(g.UsedBytes), units.FormatBytes(g.FreeBytes),
		units.FormatBytes(g.availableNow()), fmt.Sprintf("%.1f%%", g.UsedPct()),
		opt(g.TemperatureC, "°C"), opt(g.UtilizationPct, "%"), fmt.Sprint(len(g.Processes)),
	}
}

func gpuNotes(g gpuView) []string {
	var notes []string
	if g.DriverBytes > 0 {
		notes = append(notes, fmt.Sprintf("└ driver %-22s %10s", "(no process)", units.FormatBytes(g.DriverBytes)))
	}
	for _, p := range g.Processes {
		used := units.FormatBytes(p.UsedBytes)
		if p.UsedUnknown {
			used = "n/a"
		}
		name := p.Name
		if name == "" {
			name = "?"
		}
		notes = append(notes, fmt.Sprintf("└ PID %-8d %-16s %10s", p.PID, name, used))
	}
	if g.Leases > 0 || g.HeldBytes > 0 {
		line := fmt.Sprintf("└ %d lease(s), %s leased", g.Leases, units.FormatBytes(g.Accounting.LeasedBytes))
		if g.HeldBytes > 0 {
			line += fmt.Sprintf("; %s held for waiting requests", units.FormatBytes(g.HeldBytes))
		}
		notes = append(notes, line)
	}
	if !g.Accounting.Placeable {
		notes = append(notes, "! "+g.Accounting.Reason)
	}
	return notes
}
