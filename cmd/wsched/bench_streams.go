package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/units"
)

// streamsOpts are the flags of `wsched bench streams`.
type streamsOpts struct {
	backendDir, backend, model, audio string
	levels                            []int
	rounds                            int
	gpuMemory, memory, streamMemory   string
	noBaseline                        bool
}

func newBenchStreamsCmd(a *app) *cobra.Command {
	var o streamsOpts
	var levels string
	cmd := &cobra.Command{
		Use:   "streams",
		Short: "Jobs of one model through a daemon: streams sharing one instance vs max_streams = 1",
		Long: `Run N concurrent jobs of one model (N = each of --streams) through a daemon it
starts (wsched serve over one simulated GPU, the backends in --backend-dir), twice:
with the model's max_streams = the largest N (streams share one backend instance,
its lease growing by one stream per job: issue 26) and with max_streams = 1 (one
process and one lease per concurrent job: the baseline). Before the levels, each
daemon runs one untimed round at the largest N, so both modes are measured warm.
Each level runs --rounds jobs per stream back to back. Printed per level and mode: throughput in audio
seconds per second of wall time, the backend processes that served the jobs, the
most streams one instance served at once, and the peak of the leases of the
instances serving jobs (summed; "cpu" where the backend build is CPU-only and
leases no GPU memory); then the ratio of the two throughputs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.levels, err = parseLevels(levels); err != nil {
				return err
			}
			if o.rounds < 1 {
				return fmt.Errorf("--rounds %d: want at least 1", o.rounds)
			}
			return a.benchStreams(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.backendDir, "backend-dir", defaultBackendDir(), "directory with the backend executables (wsched-backend-NAME)")
	f.StringVar(&o.backend, "backend", "whisper.cpp", "backend of the model entry")
	f.StringVar(&o.model, "model", "../shared/models/whisper-empty/for-tests-ggml-tiny.bin", "model file")
	f.StringVar(&o.audio, "audio", "../shared/audio/jfk.wav", "audio file every job transcribes")
	f.StringVar(&levels, "streams", "1,2,4,8", "concurrent jobs per level, comma-separated")
	f.IntVar(&o.rounds, "rounds", 2, "jobs per stream at each level")
	f.StringVar(&o.gpuMemory, "gpu-memory", "80GiB", "memory of the simulated GPU")
	f.BoolVar(&o.noBaseline, "no-baseline", false, "skip the max_streams = 1 run")
	f.StringVar(&o.memory, "memory", "", "the model entry's memory (needed for a backend without an estimator profile)")
	f.StringVar(&o.streamMemory, "stream-memory", "", "the model entry's stream_memory: what each stream after the first adds (default: the estimate, else the whole memory)")
	return cmd
}

// defaultBackendDir is bin/ beside this executable.
func defaultBackendDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "bin"
	}
	return filepath.Dir(exe)
}

func parseLevels(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 256 {
			return nil, fmt.Errorf("--streams %q: want numbers from 1 to 256, comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// streamsRow is one level in one mode.
type streamsRow struct {
	jobs, failed  int
	audioSeconds  float64
	elapsed       time.Duration
	processes     int   // distinct backend PIDs that served the level
	peakStreams   int   // most streams one instance served at once
	peakLeaseByte int64 // most the backends' leases held together
}

func (r streamsRow) throughput() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return r.audioSeconds / r.elapsed.Seconds()
}

func (a *app) benchStreams(ctx context.Context, w io.Writer, o streamsOpts) error {
	for _, p := range []*string{&o.backendDir, &o.model, &o.audio} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	top := 0
	for _, n := range o.levels {
		top = max(top, n)
	}
	shared, err := runStreamsMode(ctx, o, top)
	if err != nil {
		return fmt.Errorf("max_streams = %d: %w", top, err)
	}
	single := make([]streamsRow, len(o.levels))
	if !o.noBaseline {
		if single, err = runStreamsMode(ctx, o, 1); err != nil {
			return fmt.Errorf("max_streams = 1: %w", err)
		}
	}
	fmt.Fprintf(w, "model %s (backend %s), audio %s, %d job(s) per stream per level, one simulated %s GPU\n",
		filepath.Base(o.model), o.backend, filepath.Base(o.audio), o.rounds, o.gpuMemory)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "streams\tshared audio s/s\tprocesses\tstreams/instance\tpeak lease\tmax_streams=1 audio s/s\tprocesses\tpeak lease\tratio\t\n")
	for i, n := range o.levels {
		s, b := shared[i], single[i]
		ratio := 0.0
		if b.throughput() > 0 {
			ratio = s.throughput() / b.throughput()
		}
		base := fmt.Sprintf("%.2f\t%d\t%s\t%.2f×", b.throughput(), b.processes, leaseText(b.peakLeaseByte), ratio)
		if o.noBaseline {
			base = "-\t-\t-\t-"
		}
		fmt.Fprintf(tw, "%d\t%.2f\t%d\t%d\t%s\t%s\t\n", n, s.throughput(), s.processes, s.peakStreams, leaseText(s.peakLeaseByte), base)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, n := range o.levels {
		if shared[i].failed+single[i].failed > 0 {
			fmt.Fprintf(w, "warning: at %d streams %d shared and %d baseline job(s) failed\n", n, shared[i].failed, single[i].failed)
		}
	}
	return nil
}

// leaseText is a peak lease, or "cpu" for instances placed on the CPU
// (a CPU-only backend build leases no GPU memory).
func leaseText(b int64) string {
	if b == 0 {
		return "cpu"
	}
	return units.FormatBytes(b)
}

// runStreamsMode starts a daemon whose one model has the given max_streams
// and measures each level on it.
func runStreamsMode(ctx context.Context, o streamsOpts, maxStreams int) ([]streamsRow, error) {
	dir, err := os.MkdirTemp("", "wss-") // short: socket paths are limited
	if err != nil {
		return nil, err
	}
	env := &benchEnv{dir: dir, socket: filepath.Join(dir, "wsched.sock"), daemonLog: &bytes.Buffer{}}
	defer env.stop()
	cfg := fmt.Sprintf(`[daemon]
socket = %q
state_dir = %q
[inventory]
provider = "sim"
[[inventory.sim]]
name = "Simulated GPU"
memory = %q
[placement]
reserved = "0B"
safety_factor = 1.0
[backends]
plugin_dir = %q
keep_alive = "10m"
[models]
dir = %q
default = "bench"
[[models.model]]
name = "bench"
backend = %q
path = %q
max_streams = %d
`, env.socket, filepath.Join(dir, "state"), o.gpuMemory, o.backendDir, filepath.Join(dir, "models"), o.backend, o.model, maxStreams)
	if o.streamMemory != "" {
		cfg += fmt.Sprintf("stream_memory = %q\n", o.streamMemory)
	}
	if o.memory != "" {
		cfg += fmt.Sprintf("memory = %q\n", o.memory)
	}
	if err := os.WriteFile(filepath.Join(dir, "wsched.toml"), []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	if err := env.serve(ctx); err != nil {
		return nil, err
	}
	c := client.New(env.socket)
	defer c.Close()
	top := 0
	for _, n := range o.levels {
		top = max(top, n)
	}
	warm := o
	warm.rounds = 1
	if _, err := streamsLevel(ctx, c, warm, top); err != nil { // warm-up: the instances the levels use
		return nil, fmt.Errorf("warm-up: %w\ndaemon log:\n%s", err, env.daemonLog.String())
	}
	var rows []streamsRow
	for _, n := range o.levels {
		row, err := streamsLevel(ctx, c, o, n)
		if err != nil {
			return nil, fmt.Errorf("%d streams: %w\ndaemon log:\n%s", n, err, env.daemonLog.String())
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// streamsLevel runs n workers submitting o.rounds jobs each, one at a time,
// while a watcher follows the backend instances.
func streamsLevel(ctx context.Context, c *client.Client, o streamsOpts, n int) (streamsRow, error) {
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan streamsRow, 1)
	go func() { watched <- watchInstances(wctx, c) }()
	var mu sync.Mutex
	row := streamsRow{}
	var firstErr error
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for range o.rounds {
				j, err := runJob(ctx, c, o.audio)
				mu.Lock()
				row.jobs++
				switch {
				case err != nil:
					firstErr = cmpErr(firstErr, err)
				case j.State != api.JobCompleted:
					row.failed++
				default:
					row.audioSeconds += j.AudioSeconds
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	row.elapsed = time.Since(start)
	stopWatch()
	seen := <-watched
	row.processes, row.peakStreams, row.peakLeaseByte = seen.processes, seen.peakStreams, seen.peakLeaseByte
	return row, firstErr
}

// runJob submits one job and waits for it to finish.
func runJob(ctx context.Context, c *client.Client, audio string) (api.Job, error) {
	j, err := c.SubmitJob(ctx, api.JobRequest{AudioPath: audio})
	if err != nil {
		return api.Job{}, fmt.Errorf("submit: %w", err)
	}
	for !j.State.Finished() {
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if j, err = c.Job(ctx, j.ID); err != nil {
			return j, fmt.Errorf("job %s: %w", j.ID, err)
		}
	}
	return j, nil
}

// watchInstances polls /v1/backends until ctx ends: the distinct backend
// processes seen serving a job, the most streams on one instance and the
// most the leases of the instances serving jobs held together (idle
// instances kept warm are left out).
func watchInstances(ctx context.Context, c *client.Client) streamsRow {
	pids := map[int]bool{}
	var row streamsRow
	for ctx.Err() == nil {
		if b, err := c.Backends(ctx); err == nil {
			var sum int64
			for _, i := range b.Instances {
				if i.Streams == 0 { // idle, kept warm: not serving this level
					continue
				}
				if i.PID > 0 {
					pids[i.PID] = true
				}
				row.peakStreams = max(row.peakStreams, i.Streams)
				sum += i.MemoryBytes
			}
			row.peakLeaseByte = max(row.peakLeaseByte, sum)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	row.processes = len(pids)
	return row
}
