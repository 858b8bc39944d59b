package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/units"
)

// barTerms are the accounting formula's terms in bar order, with the rune
// that draws each (so the bar reads without colour too).
var barTerms = []struct {
	name string
	r    string
}{{"foreign", "#"}, {"driver", ":"}, {"attributed", "="}, {"unrealized", "-"}, {"held", "H"}, {"available", "."}}

// terms splits a GPU's total by the formula (as the monitor page does):
// "driver" is what the formula keeps back (reserved, the safety margin).
func terms(g api.GPU) map[string]int64 {
	a := g.Accounting
	avail := max(0, a.AvailableBytes)
	held := min(g.HeldBytes, avail)
	t := map[string]int64{"foreign": a.ForeignBytes, "attributed": a.AttributedBytes, "unrealized": a.UnrealizedBytes,
		"held": held, "available": avail - held}
	t["driver"] = max(0, a.TotalBytes-t["foreign"]-t["attributed"]-t["unrealized"]-avail)
	return t
}

func (m *topModel) bar(g api.GPU, width int) string {
	t := terms(g)
	var b strings.Builder
	used := 0
	for i, term := range barTerms {
		n := 0
		if g.Accounting.TotalBytes > 0 {
			n = int(float64(t[term.name]) / float64(g.Accounting.TotalBytes) * float64(width))
		}
		if i == len(barTerms)-1 {
			n = max(0, width-used)
		}
		n = min(n, width-used)
		used += n
		b.WriteString(m.st.seg[term.name].Render(strings.Repeat(term.r, n)))
	}
	return "[" + b.String() + "]"
}

func (m *topModel) View() string {
	if !m.received {
		return "wsched top: connecting…  (q quits)\n"
	}
	var b strings.Builder
	leases := len(m.gpus.CPU)
	for _, g := range m.gpus.GPUs {
		leases += len(g.Leases)
	}
	fmt.Fprintf(&b, "%s  %s · policy %s · %d GPUs · %d leases · %d queued · jobs: %s\n", m.st.title.Render("wsched top"),
		m.gpus.Provider, m.gpus.Policy, len(m.gpus.GPUs), leases, len(m.gpus.Queue), jobOrders[m.order])
	b.WriteString(m.st.muted.Render("bar: # foreign  : reserved  = leased, in use  - leased, unused  H held for queue head  . available") + "\n\n")
	barWidth := max(10, min(40, m.width-60))
	for _, g := range m.gpus.GPUs {
		a := g.Accounting
		line := fmt.Sprintf("GPU %-2d %s %9s avail of %-9s leased %-9s leases %d", g.Index, m.bar(g, barWidth),
			units.FormatBytes(max(0, a.AvailableBytes)), units.FormatBytes(a.TotalBytes), units.FormatBytes(a.LeasedBytes), len(g.Leases))
		if g.HeldBytes > 0 {
			line += fmt.Sprintf(" held %s", units.FormatBytes(g.HeldBytes))
		}
		if !a.Placeable {
			line += " " + m.st.bad.Render("! "+a.Reason)
		}
		b.WriteString(line + "\n")
	}
	m.viewQueue(&b)
	m.viewUIDs(&b)
	m.viewJobs(&b)
	if m.snapshot {
		b.WriteString(m.st.muted.Render("\na snapshot: no terminal to follow it live (`wsched status` for a summary)") + "\n")
	} else {
		b.WriteString(m.st.muted.Render("\ns sort · ↑/↓ select · f follow · esc unfollow · q quit") + "\n")
	}
	return b.String()
}

func (m *topModel) viewQueue(b *strings.Builder) {
	fmt.Fprintf(b, "\n%s\n", m.st.title.Render("QUEUE"))
	if len(m.gpus.Queue) == 0 {
		b.WriteString(m.st.muted.Render("  nothing waits") + "\n")
	}
	held := map[string]api.Hold{}
	for _, h := range m.gpus.Held {
		held[h.LeaseID] = h
	}
	for i, q := range m.gpus.Queue {
		why := fmt.Sprintf("needs %s on %s", units.FormatBytes(q.MemoryBytes), q.Device)
		if h, ok := held[q.ID]; ok {
			why = fmt.Sprintf("%s held for it on GPU %d", units.FormatBytes(h.Bytes), h.GPUIndex)
		}
		fmt.Fprintf(b, "  %2d %-20s %9s %-6s %8s  %s\n", i+1, q.ID, units.FormatBytes(q.MemoryBytes), q.Priority, age(q.Created), why)
	}
}

func (m *topModel) viewUIDs(b *strings.Builder) {
	if len(m.gpus.UIDs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s %s\n", m.st.title.Render("USERS"), m.st.muted.Render("recent use (GiB·s, decayed) next to fair share"))
	_ = uidTable(b, "  ", m.gpus.UIDs)
}

func (m *topModel) viewJobs(b *strings.Builder) {
	fmt.Fprintf(b, "\n%s\n", m.st.title.Render("JOBS"))
	js := m.sortedJobs()
	if len(js) == 0 {
		b.WriteString(m.st.muted.Render("  no jobs") + "\n")
	}
	for i, j := range js {
		if i >= 20 {
			fmt.Fprintf(b, "  … %d more\n", len(js)-i)
			break
		}
		mark := " "
		if i == m.cursor {
			mark = ">"
		}
		gpu := "-"
		if j.GPUUUID != "" && j.GPUIndex >= 0 { // a CPU lease's GPU is "cpu", index -1
			gpu = fmt.Sprintf("GPU %d", j.GPUIndex)
		}
		fmt.Fprintf(b, "%s %-22s %-10s %4.0f%% %-14s %-6s %8s  %s\n", mark, j.ID, j.State, j.Progress, j.Spec.Model, gpu, age(j.Created), jobNote(j))
	}
	if j, ok := m.jobs[m.follow]; ok {
		fmt.Fprintf(b, "\nfollowing %s: %s, %.0f%%, attempt %d, backend %s, lease %s %s\n", j.ID, j.State, j.Progress, j.Attempts,
			j.Backend, j.LeaseID, m.st.bad.Render(j.Error))
	}
}

func age(t time.Time) string { return time.Since(t).Round(time.Second).String() }

// jobNote is what a job's row adds: a queued job's expected start
// (length-aware order), a chunked job's chunks.
func jobNote(j api.Job) string {
	var parts []string
	if j.State == api.JobPending && !j.ExpectedStart.IsZero() {
		if d := time.Until(j.ExpectedStart).Round(time.Second); d > 0 {
			parts = append(parts, "starts in "+d.String())
		} else {
			parts = append(parts, "starts now")
		}
	}
	if c := j.Chunks; c != nil {
		parts = append(parts, fmt.Sprintf("chunks %d/%d", c.Done, c.Total))
	}
	return strings.Join(parts, " · ")
}
