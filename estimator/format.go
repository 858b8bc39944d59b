package estimator

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/wsched/wsched/internal/units"
)

// WriteText renders r for people, like the seed's report: total,
// recommended, the breakdown, each GPU's fit, suggestions and, with explain,
// the reasoning. The CLI prints this; --json prints r itself.
func (r Result) WriteText(w io.Writer, explain bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("backend\t%s\n", r.Backend)
	p("model\t%s (%s)\n", r.Model, r.Precision)
	p("total\t%s (%s)\n", units.FormatBytes(r.TotalBytes), r.Source)
	p("recommended\t%s\n", units.FormatBytes(r.RecommendedBytes))
	for i, c := range r.Breakdown.components() {
		label := ""
		if i == 0 {
			label = "breakdown"
		}
		p("%s\t  %s\t%s\n", label, c.name, units.FormatBytes(c.bytes))
	}
	if s := r.Streams; s != nil && (s.Concurrency > 1 || explain) {
		p("shared\t%s\t%v\n", units.FormatBytes(s.SharedBytes), s.Shared)
		p("per stream\t%s\t%v\n", units.FormatBytes(s.PerStreamBytes), s.PerStream)
		p("streams\t%d in one instance: %s (as %d processes: %s, %.2f×)\n", s.Concurrency, units.FormatBytes(s.TotalBytes),
			s.Concurrency, units.FormatBytes(s.ProcessPerJobBytes), s.Density())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, g := range r.GPUs {
		ok := "insufficient"
		if g.Sufficient {
			ok = "sufficient"
		}
		copies := "copies"
		if g.Copies == 1 {
			copies = "copy"
		}
		fmt.Fprintf(w, "gpu %d (%s): %s available, %s, %d %s\n", g.Index, g.Name, units.FormatBytes(g.AvailableBytes), ok, g.Copies, copies)
	}
	if len(r.Suggestions) > 0 {
		fmt.Fprintln(w, "suggestions:")
		for _, s := range r.Suggestions {
			fmt.Fprintf(w, "  - %s\n", s)
		}
	}
	if explain {
		fmt.Fprintln(w, "explain:")
		for _, s := range r.Explain {
			fmt.Fprintf(w, "  - %s\n", s)
		}
	}
	return nil
}

type component struct {
	name  string
	bytes int64
}

// components lists the non-zero additive parts in a fixed order.
func (b Breakdown) components() []component {
	all := []component{
		{"weights", b.Weights}, {"kv_self", b.KVSelf}, {"kv_cross", b.KVCross}, {"kv_pad", b.KVPad},
		{"compute", b.Compute}, {"cuda_pool", b.CUDAPool}, {"cuda_runtime", b.CUDARuntime}, {"transient", b.Transient},
		{"activations", b.Activations}, {"audio", b.Audio}, {"batch", b.Batch},
		{"overhead", b.Overhead}, {"context", b.Context}, {"learned", b.Learned},
	}
	out := all[:0]
	for _, c := range all {
		if c.bytes != 0 {
			out = append(out, c)
		}
	}
	return out
}
