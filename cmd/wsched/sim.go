package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/sim"
)

// simFlags are the options of `wsched sim`.
type simFlags struct {
	workload, policy, model string
	trace                   string
	jobs                    int
	seed                    uint64
	load                    float64
	cfg                     sim.Config
	asJSON                  bool
}

func newSimCmd(a *app) *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run the placement engine and job order on virtual time against a workload, per policy",
		Long: `Run the real placement engine (over simulated H100s, on a virtual clock) and the
job scheduler's order against a workload, and print per policy: jobs, short-job
p95 wait, long-job p95 completion, makespan, OOMs, mean streams per GPU and mean
stranded memory, then wsched against fifo on issue 26's targets.

--workload mixed (the default) is built in: 90 % clips of 3–15 s and 10 % files
of 5–15 min, Poisson arrivals at --load of the machine's capacity, --jobs jobs of
--model. --workload FILE reads JSON Lines, one job a line ("-": stdin):
  {"arrival": 12.5, "audio_seconds": 8, "model": "large-v3", "priority": "normal", "uid": 1000}
--trace FILE ("-": stdin) reads a daemon's trace instead (` + "`wsched jobs --trace > FILE`" + `, GET
/v1/jobs/trace): its jobs as the workload (models by family: tiny, base, small,
medium, large), its lease events summarised beside the table.

Policies: fifo (arrival order, streams sharing an instance), wsched (shortest
expected time first with aging, the short-job reserve of [jobs] short_reserve,
streams), process-per-job
(arrival order, one backend process per running job). Backends are modelled by
the estimator's lease parts, NVML's per-process memory and the real-time factors
measured on an H100 (docs/sim.md says which figures are measured and which are
assumed). The same --seed gives the same output.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.sim(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.workload, "workload", "mixed", `"mixed" or a JSON Lines file ("-": stdin)`)
	fl.StringVar(&f.trace, "trace", "", `a daemon's trace (wsched jobs --trace) as the workload ("-": stdin)`)
	fl.StringVar(&f.policy, "policy", "", "fifo, wsched or process-per-job; comma-separated for several (default: all)")
	fl.StringVar(&f.model, "model", "large-v3", "model of the mixed workload")
	fl.IntVar(&f.jobs, "jobs", 20000, "jobs of the mixed workload")
	fl.Float64Var(&f.load, "load", 0.8, "arrival rate of the mixed workload as a fraction of capacity")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the mixed workload and of the processing-time jitter")
	fl.IntVar(&f.cfg.GPUs, "gpus", 8, "simulated H100s")
	fl.IntVar(&f.cfg.StreamsPerGPU, "streams-per-gpu", 4, "streams a GPU runs at full speed at once (an assumption)")
	fl.IntVar(&f.cfg.ShortReserve, "short-reserve", 0, "streams (machine-wide) wsched keeps for short jobs, as [jobs] short_reserve keeps max_active slots (0: an eighth of all; -1: none)")
	fl.DurationVar(&f.cfg.MaxReorderWait, "max-reorder-wait", 2*time.Minute, "[jobs] max_reorder_wait for wsched")
	fl.DurationVar(&f.cfg.KeepAlive, "keep-alive", 5*time.Minute, "how long an idle instance stays loaded")
	fl.Float64Var(&f.cfg.ShortSeconds, "short", 60, "audio seconds below which a job is short")
	fl.DurationVar(&f.cfg.ChunkOver, "chunk-over", 0, "model long files across GPUs ([jobs] chunk_over): audio longer than this runs as 30 s windows (0: off)")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object per policy (one line each)")
	return cmd
}

func (a *app) sim(cmd *cobra.Command, f simFlags) error {
	policies, err := simPolicies(f.policy)
	if err != nil {
		return err
	}
	if f.jobs < 1 || f.jobs > 1_000_000 || !(f.load > 0 && f.load <= 2) || f.cfg.GPUs < 1 || f.cfg.GPUs > 1024 ||
		f.cfg.StreamsPerGPU < 1 || f.cfg.StreamsPerGPU > 1024 {
		return fmt.Errorf("sim: want --jobs 1 to 1000000, --load above 0 up to 2, --gpus and --streams-per-gpu 1 to 1024")
	}
	f.cfg.Seed = f.seed
	work, trace, err := simWorkload(f, a.in)
	if err != nil {
		return err
	}
	results, err := sim.RunAll(cmd.Context(), f.cfg, work, policies)
	if err != nil {
		return err
	}
	if f.asJSON {
		enc := json.NewEncoder(a.out)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	switch {
	case trace != nil:
		fmt.Fprintf(a.out, "trace: %s, %d jobs (%d of unknown duration left out), %d lease events (%d grants, at most %s leased at once in the daemon), %d × %s, %d streams per GPU, seed %d\n",
			f.trace, len(work), trace.Skipped, trace.LeaseEvents, trace.Granted, units.FormatBytes(trace.PeakLeasedBytes), f.cfg.GPUs, sim.H100, f.cfg.StreamsPerGPU, f.seed)
	case f.workload == "mixed":
		fmt.Fprintf(a.out, "workload: mixed, %d jobs of %s, load %.0f%%, %d × %s, %d streams per GPU, seed %d\n",
			len(work), f.model, f.load*100, f.cfg.GPUs, sim.H100, f.cfg.StreamsPerGPU, f.seed)
	default:
		fmt.Fprintf(a.out, "workload: %s, %d jobs, %d × %s, %d streams per GPU, seed %d\n",
			f.workload, len(work), f.cfg.GPUs, sim.H100, f.cfg.StreamsPerGPU, f.seed)
	}
	return sim.WriteTable(a.out, results)
}

func simPolicies(s string) ([]sim.Policy, error) {
	if s == "" {
		return sim.Policies, nil
	}
	var out []sim.Policy
	for _, name := range strings.Split(s, ",") {
		p, err := sim.ParsePolicy(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// openInput opens the file a flag names, or stdin for "-" (closing it is
// then a no-op).
func openInput(name string, stdin io.Reader) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(stdin), nil
	}
	return os.Open(name)
}

func simWorkload(f simFlags, stdin io.Reader) ([]sim.Job, *sim.Trace, error) {
	if f.trace != "" {
		file, err := openInput(f.trace, stdin)
		if err != nil {
			return nil, nil, fmt.Errorf("sim: trace: %w", err)
		}
		defer file.Close()
		tr, err := sim.ReadTrace(file)
		if err != nil {
			return nil, nil, err
		}
		return tr.Jobs, &tr, nil
	}
	if f.workload != "mixed" {
		file, err := openInput(f.workload, stdin)
		if err != nil {
			return nil, nil, fmt.Errorf("sim: workload: %w", err)
		}
		defer file.Close()
		w, err := sim.ReadWorkload(file)
		return w, nil, err
	}
	capacity, err := sim.MixedCapacity(f.cfg, f.model)
	if err != nil {
		return nil, nil, err
	}
	return sim.Mixed(sim.MixedSpec{Jobs: f.jobs, Model: f.model, Load: f.load, Capacity: capacity, Seed: f.seed}), nil, nil
}
