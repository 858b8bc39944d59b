// Package sim is `wsched sim`: it runs the real placement engine
// (placement.Engine over simulated GPUs, on a virtual clock) and the job
// order of the jobs package (jobs.Order, jobs.RTFTable) against a workload,
// with backends modelled by real-time factor and memory from measured
// tables (profiles.go), and reports waits, completions, makespan, OOMs,
// streams per GPU and stranded memory per policy.
//
// Virtual time only: the engine's clock is the simulator's, every engine
// call returns before the simulator moves on, and nothing sleeps, so a run
// is deterministic for a workload and seed.
package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/wsched/wsched/jobs"
)

// Policy is how jobs are ordered and run.
type Policy string

// Policies.
const (
	// FIFO: arrival order within a priority; streams share an instance.
	FIFO Policy = "fifo"
	// WSched: length-aware order (shortest expected time first, aging
	// bounded by MaxReorderWait), short jobs pass a long one that cannot
	// start, ShortReserve streams (machine-wide) kept for short jobs as the
	// daemon's [jobs] short_reserve keeps max_active slots; streams share
	// an instance.
	WSched Policy = "wsched"
	// ProcessPerJob: the mode before issue 26 — arrival order, one backend
	// process per running job (an idle process is reused while kept alive).
	ProcessPerJob Policy = "process-per-job"
)

// Policies lists them in the order the CLI prints them.
var Policies = []Policy{FIFO, WSched, ProcessPerJob}

// ParsePolicy reads a policy name.
func ParsePolicy(s string) (Policy, error) {
	for _, p := range Policies {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("sim: policy %q: want fifo, wsched or process-per-job", s)
}

// Config is one simulation.
type Config struct {
	Policy Policy
	// GPUs is the number of simulated H100s (8).
	GPUs int
	// StreamsPerGPU is how many streams a GPU runs at full speed at once
	// (its compute slots; 4): an assumption, not a measurement.
	StreamsPerGPU int
	// MaxReorderWait is [jobs] max_reorder_wait for WSched (2m).
	MaxReorderWait time.Duration
	// ShortReserve is how many streams (machine-wide) WSched keeps for
	// short jobs, as [jobs] short_reserve keeps max_active slots: a long
	// job starts only while fewer than GPUs × StreamsPerGPU − ShortReserve
	// long streams run (default an eighth of all, as short_reserve 8 of
	// max_active 64; a negative value: none).
	ShortReserve int
	// KeepAlive is how long an idle instance stays loaded (5m).
	KeepAlive time.Duration
	// ShortSeconds: jobs with less audio are short, the others long (60).
	ShortSeconds float64
	// Jitter spreads each job's processing time uniformly by ±Jitter
	// around audio × RTF (0.2), so that learning has something to learn.
	Jitter float64
	// Seed drives the jitter.
	Seed uint64
	// Profile models a backend (nil: H100Profile).
	Profile func(model string) (Profile, error)
	// ChunkOver, when above 0, models long files across GPUs (not built in
	// the daemon): audio longer than it runs as 30 s windows (jobs/chunk's
	// plan), each a job of its own in the queue; the file completes with its
	// last window.
	ChunkOver time.Duration
}

func (c Config) withDefaults() Config {
	if c.GPUs <= 0 {
		c.GPUs = 8
	}
	if c.StreamsPerGPU <= 0 {
		c.StreamsPerGPU = 4
	}
	switch {
	case c.ShortReserve < 0:
		c.ShortReserve = 0
	case c.ShortReserve == 0:
		c.ShortReserve = max(1, c.GPUs*c.StreamsPerGPU/8)
	}
	c.ShortReserve = min(c.ShortReserve, c.GPUs*c.StreamsPerGPU-1)
	if c.MaxReorderWait == 0 {
		c.MaxReorderWait = 2 * time.Minute
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 5 * time.Minute
	}
	if c.ShortSeconds <= 0 {
		c.ShortSeconds = 60
	}
	if c.Jitter < 0 || c.Jitter >= 1 {
		c.Jitter = 0
	} else if c.Jitter == 0 {
		c.Jitter = 0.2
	}
	if c.Profile == nil {
		c.Profile = H100Profile
	}
	return c
}

// Result is one policy's outcome; the JSON keys are `wsched sim --json`'s.
type Result struct {
	Policy                   Policy  `json:"policy"`
	Jobs                     int     `json:"jobs"`
	ShortP95WaitSeconds      float64 `json:"short_p95_wait_seconds"`
	LongP95CompletionSeconds float64 `json:"long_p95_completion_seconds"`
	MakespanSeconds          float64 `json:"makespan_seconds"`
	OOM                      int     `json:"oom"`
	StreamsPerGPUMean        float64 `json:"streams_per_gpu_mean"`
	StrandedBytesMean        float64 `json:"stranded_bytes_mean"`
	// Beyond the required keys.
	ShortJobs        int     `json:"short_jobs"`
	LongJobs         int     `json:"long_jobs"`
	ShortP50Wait     float64 `json:"short_p50_wait_seconds"`
	LongP95Wait      float64 `json:"long_p95_wait_seconds"`
	MaxWaitSeconds   float64 `json:"max_wait_seconds"`
	LeasedBytesMean  float64 `json:"leased_bytes_mean"`
	InstancesStarted int     `json:"instances_started"`
}

// ErrUnplaceable says a job can never run: its model does not fit an empty
// GPU.
var ErrUnplaceable = errors.New("job cannot be placed on any GPU")

// Run simulates workload (in arrival order) under cfg.
func Run(ctx context.Context, cfg Config, workload []Job) (Result, error) {
	cfg = cfg.withDefaults()
	if _, err := ParsePolicy(string(cfg.Policy)); err != nil {
		return Result{}, err
	}
	if len(workload) == 0 {
		return Result{}, errors.New("sim: empty workload")
	}
	m, err := newMachine(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer m.stop()
	s := &simulation{cfg: cfg, m: m, rtf: newRTF(), profiles: map[string]Profile{}, rng: newRNG(cfg.Seed), work: workload}
	if cfg.ChunkOver > 0 {
		if s.work, s.parent, err = split(workload, cfg.ChunkOver); err != nil {
			return Result{}, err
		}
		s.orig = workload
	}
	s.records = make([]record, len(s.work))
	if cfg.Policy == WSched {
		s.order.MaxReorderWait = cfg.MaxReorderWait
	}
	if err := s.run(ctx); err != nil {
		return Result{}, err
	}
	return s.result(), nil
}

func newRTF() *jobs.RTFTable        { return jobs.NewRTFTable() }
func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 26)) }

// seconds converts virtual seconds to a duration.
func seconds(f float64) time.Duration { return time.Duration(math.Round(f * float64(time.Second))) }
