package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
)

func newTopCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "top",
		Short: "Watch GPUs, leases, the queue and jobs live in the terminal",
		Long: `top shows what the monitor page shows, refreshed on the daemon's events: per GPU
the accounting formula's terms as a bar, its leases, the queue with why each request
waits, and the jobs. Keys: s cycles the job order (newest, state, progress), ↑/↓ or
k/j select a job, f follows the selected job (its details stay shown), esc stops
following, q quits. NO_COLOR turns colours off. Without a terminal (stdin or stdout
a pipe or a file) it prints one plain snapshot and exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			if !isTerminal(a.in) || !isTerminal(a.out) {
				return a.topSnapshot(cmd.Context(), c) // bubbletea reads keys from a terminal
			}
			m := newTopModel(topStyles(a))
			p := tea.NewProgram(m, tea.WithContext(cmd.Context()), tea.WithInput(a.in), tea.WithOutput(a.out), tea.WithAltScreen())
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			go followMonitor(ctx, c, p)
			final, err := p.Run()
			if err != nil && !errors.Is(err, tea.ErrProgramKilled) {
				return err
			}
			if fm, ok := final.(*topModel); ok && fm.err != nil {
				return fm.err
			}
			return nil
		},
	}
}

// errSnapshotTaken ends the monitor stream once top has its snapshot.
var errSnapshotTaken = errors.New("snapshot taken")

// topSnapshot prints what top would show first, as plain text, for a caller
// without a terminal (a pipe, cron, CI).
func (a *app) topSnapshot(ctx context.Context, c *client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, client.RequestTimeout)
	defer cancel()
	m := newTopModel(topStyles(a))
	m.snapshot = true
	err := c.Monitor(ctx, func(fr api.MonitorFrame) error {
		m.apply(fr)
		if m.received {
			return errSnapshotTaken
		}
		return nil
	})
	if !m.received {
		if err == nil {
			err = errors.New("the stream ended before its first snapshot")
		}
		return fmt.Errorf("top: read the daemon's monitor stream: %w", err)
	}
	_, err = io.WriteString(a.out, m.View())
	return err
}

// followMonitor feeds the monitor stream's frames to the program until ctx
// ends, reconnecting after the daemon dropped a slow reader.
func followMonitor(ctx context.Context, c *client.Client, p *tea.Program) {
	for {
		err := c.Monitor(ctx, func(fr api.MonitorFrame) error {
			p.Send(frameMsg{fr})
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, client.ErrLagged) {
			p.Send(streamEndMsg{err})
			return
		}
	}
}

type frameMsg struct{ api.MonitorFrame }

// streamEndMsg: the stream ended (the daemon stopped or refused it).
type streamEndMsg struct{ err error }

// jobOrders are the orders s cycles through.
var jobOrders = []string{"newest", "state", "progress"}

// topModel is the state of `wsched top`; bubbletea's loop owns it.
type topModel struct {
	st       styles
	gpus     api.GPUs
	status   api.Status
	jobs     map[string]api.Job
	order    int
	cursor   int
	follow   string
	width    int
	received bool
	snapshot bool // one plain frame, no keys (no terminal)
	err      error
}

func newTopModel(st styles) *topModel {
	return &topModel{st: st, jobs: map[string]api.Job{}, width: 100}
}

func (m *topModel) Init() tea.Cmd { return nil }

func (m *topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case frameMsg:
		m.apply(msg.MonitorFrame)
	case streamEndMsg:
		m.err = msg.err
		return m, tea.Quit
	case tea.KeyMsg:
		return m, m.key(msg.String())
	}
	return m, nil
}

func (m *topModel) apply(fr api.MonitorFrame) {
	switch {
	case fr.Snapshot != nil:
		m.gpus, m.status, m.received = fr.Snapshot.GPUs, fr.Snapshot.Status, true
		m.jobs = map[string]api.Job{}
		for _, j := range fr.Snapshot.Jobs {
			m.jobs[j.ID] = j
		}
	case fr.Placement != nil:
		m.gpus = fr.Placement.GPUs
	case fr.GPUs != nil:
		m.gpus = *fr.GPUs
	case fr.Job != nil:
		m.jobs[fr.Job.Job.ID] = fr.Job.Job
	}
}

func (m *topModel) key(k string) tea.Cmd {
	switch k {
	case "q", "ctrl+c":
		return tea.Quit
	case "s":
		m.order = (m.order + 1) % len(jobOrders)
	case "down", "j":
		m.cursor = min(m.cursor+1, max(0, len(m.jobs)-1))
	case "up", "k":
		m.cursor = max(m.cursor-1, 0)
	case "f", "enter":
		if js := m.sortedJobs(); m.cursor < len(js) {
			m.follow = js[m.cursor].ID
		}
	case "esc":
		m.follow = ""
	}
	return nil
}

var stateRank = map[api.JobState]int{"processing": 0, "loading": 1, "pending": 2, "failed": 3, "cancelled": 4, "completed": 5}

func (m *topModel) sortedJobs() []api.Job {
	js := make([]api.Job, 0, len(m.jobs))
	for _, j := range m.jobs {
		js = append(js, j)
	}
	slices.SortFunc(js, func(a, b api.Job) int {
		switch jobOrders[m.order] {
		case "state":
			if d := stateRank[a.State] - stateRank[b.State]; d != 0 {
				return d
			}
		case "progress":
			if a.Progress != b.Progress {
				if a.Progress > b.Progress {
					return -1
				}
				return 1
			}
		}
		return cmpDesc(a, b)
	})
	return js
}

func cmpDesc(a, b api.Job) int {
	if c := b.Created.Compare(a.Created); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// styles are top's colours; without colour (NO_COLOR) they render plain.
type styles struct {
	title, muted, bad lipgloss.Style
	seg               map[string]lipgloss.Style
}

// topStyles honours NO_COLOR (https://no-color.org): any value turns
// colours off.
func topStyles(a *app) styles {
	r := lipgloss.NewRenderer(a.out)
	if v, ok := a.lookupEnv("NO_COLOR"); ok && v != "" {
		r.SetColorProfile(termenv.Ascii)
	}
	c := func(col string) lipgloss.Style { return r.NewStyle().Foreground(lipgloss.Color(col)) }
	return styles{
		title: r.NewStyle().Bold(true), muted: c("244"), bad: c("160"),
		seg: map[string]lipgloss.Style{"foreign": c("130"), "driver": c("248"), "attributed": c("33"),
			"unrealized": c("117"), "held": c("208"), "available": c("71")},
	}
}
