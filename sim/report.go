package sim

import (
	"context"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/wsched/wsched/internal/units"
)

// Targets of issue 26 for the mixed workload, wsched against fifo.
const (
	TargetShortWaitRatio      = 5.0 // fifo's short p95 wait / wsched's, at least
	TargetLongCompletionRatio = 1.2 // wsched's long p95 completion / fifo's, at most
)

// MixedCapacity is the jobs per second cfg's machine completes at full use
// on the mixed workload of model (streams × GPUs over the mean service
// time; load times not counted).
func MixedCapacity(cfg Config, model string) (float64, error) {
	cfg = cfg.withDefaults()
	p, err := cfg.Profile(model)
	if err != nil {
		return 0, err
	}
	return float64(cfg.GPUs*cfg.StreamsPerGPU) / (MeanMixedAudio() * p.RTF), nil
}

// RunAll runs workload under each policy with cfg's other settings.
func RunAll(ctx context.Context, cfg Config, workload []Job, policies []Policy) ([]Result, error) {
	out := make([]Result, 0, len(policies))
	for _, p := range policies {
		c := cfg
		c.Policy = p
		r, err := Run(ctx, c, workload)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Comparison is wsched against fifo on the targets.
type Comparison struct {
	ShortWaitRatio      float64 // fifo / wsched short p95 wait (+Inf when wsched's is 0 and fifo's is not)
	LongCompletionRatio float64 // wsched / fifo long p95 completion
	OOM                 int     // wsched's
}

// Met says whether every target holds.
func (c Comparison) Met() bool {
	return c.ShortWaitRatio >= TargetShortWaitRatio && c.LongCompletionRatio <= TargetLongCompletionRatio && c.OOM == 0
}

// Compare computes the comparison from the results (ok false without both).
func Compare(results []Result) (Comparison, bool) {
	var fifo, ws *Result
	for i := range results {
		switch results[i].Policy {
		case FIFO:
			fifo = &results[i]
		case WSched:
			ws = &results[i]
		}
	}
	if fifo == nil || ws == nil {
		return Comparison{}, false
	}
	c := Comparison{OOM: ws.OOM, LongCompletionRatio: ratio(ws.LongP95CompletionSeconds, fifo.LongP95CompletionSeconds)}
	c.ShortWaitRatio = ratio(fifo.ShortP95WaitSeconds, ws.ShortP95WaitSeconds)
	return c, true
}

func ratio(a, b float64) float64 {
	switch {
	case b > 0:
		return a / b
	case a > 0:
		return math.Inf(1)
	}
	return 1
}

// WriteTable prints the results side by side and, with fifo and wsched
// among them, the ratio line against the targets.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tjobs\tshort p95 wait\tlong p95 completion\tmakespan\tOOMs\tstreams/GPU\tstranded\tleased\tinstances\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%.2f s\t%.1f s\t%.0f s\t%d\t%.2f\t%s\t%s\t%d\t\n", r.Policy, r.Jobs, r.ShortP95WaitSeconds,
			r.LongP95CompletionSeconds, r.MakespanSeconds, r.OOM, r.StreamsPerGPUMean,
			units.FormatBytes(int64(r.StrandedBytesMean)), units.FormatBytes(int64(r.LeasedBytesMean)), r.InstancesStarted)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c, ok := Compare(results)
	if !ok {
		return nil
	}
	verdict := "targets met"
	if !c.Met() {
		verdict = "targets NOT met"
	}
	_, err := fmt.Fprintf(w, "wsched vs fifo: short-job p95 wait %s lower (target ≥ %.0f×), long-job p95 completion %.2f× (target ≤ %.1f×), OOMs %d (target 0): %s\n",
		times(c.ShortWaitRatio), TargetShortWaitRatio, c.LongCompletionRatio, TargetLongCompletionRatio, c.OOM, verdict)
	return err
}

func times(f float64) string {
	if math.IsInf(f, 1) {
		return "∞× (wsched's is 0)"
	}
	return fmt.Sprintf("%.1f×", f)
}
