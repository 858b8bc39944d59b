package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/models"
)

// modelsView is what `wsched models list --json` prints.
type modelsView struct {
	// Source is "daemon" (the daemon's registry, memory and GPUs) or
	// "local" (this machine's config and GPU reading); Note says so.
	Source    string              `json:"source"`
	Note      string              `json:"note"`
	ModelsDir string              `json:"models_dir"`
	GPUs      []estimator.GPUFree `json:"gpus"`
	Models    []modelView         `json:"models"`
	// Partial names unfinished downloads in models_dir.
	Partial []string `json:"partial,omitempty"`
}

// modelView is one model with its memory estimate.
type modelView struct {
	models.Model
	Estimate *modelEstimate `json:"estimate,omitempty"`
	// EstimateError says why there is no estimate.
	EstimateError string `json:"estimate_error,omitempty"`
}

// modelEstimate is the estimator's answer for a model: its peak, the
// recommendation placement leases, and whether it fits on each GPU.
type modelEstimate struct {
	// Source is "memory" (the entry's memory) or "estimator".
	Source           string             `json:"source,omitempty"`
	Precision        string             `json:"precision"`
	TotalBytes       int64              `json:"total_bytes"`
	RecommendedBytes int64              `json:"recommended_bytes"`
	GPUs             []estimator.GPUFit `json:"gpus"`
}

func newModelsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List the models wsched serves; download whisper.cpp models",
		Long: `The models wsched serves are the [[models.model]] entries of the config and
the whisper.cpp files ggml-NAME.bin in [models] dir (or
$WSCHED_MODELS_DIR), served as model NAME. A configured entry wins over a file
of the same name.`,
	}
	cmd.AddCommand(newModelsListCmd(a), newModelsPullCmd(a))
	return cmd
}

func newModelsListCmd(a *app) *cobra.Command {
	var asJSON, noDaemon bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List models: backend, size, memory estimate and fit per GPU, path",
		Long: `List the models with their backend, file size, the memory a lease for each
gets (the entry's memory, or the estimator's recommendation, read from the
ggml header for whisper.cpp files), whether it fits on each GPU now and how
many copies would, and the path. When a daemon answers these are the daemon's
models, sizes and GPUs (leases and memory held for waiting requests counted);
otherwise (or with --no-daemon) this machine's config and a local GPU
reading, and the output says so. A configured model whose file is missing is
listed with the problem, not an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.modelsList(cmd.Context(), asJSON, noDaemon)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&noDaemon, "no-daemon", false, "list this machine's configured models and local GPUs without asking a running daemon")
	return cmd
}

func (a *app) modelsList(ctx context.Context, asJSON, noDaemon bool) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	var view modelsView
	why := "--no-daemon"
	if !noDaemon {
		if view, err = daemonModels(ctx, cfg.Daemon.Socket); err != nil {
			why = fmt.Sprintf("no daemon answered on %s (%v)", cfg.Daemon.Socket, err)
		}
	}
	if noDaemon || err != nil {
		if view, err = a.localModels(ctx, cfg); err != nil {
			return err
		}
		view.Note = "local view: " + why + "; this machine's config and GPUs, leases not counted"
	}
	if asJSON {
		return a.printJSON(view)
	}
	return writeModels(a.out, view)
}

// localModels is the registry of this machine's config, sized against a
// local GPU reading.
func (a *app) localModels(ctx context.Context, cfg *config.Config) (modelsView, error) {
	reg, err := models.Load(ctx, cfg.Models, backendSet(ctx, cfg.Backends))
	if err != nil {
		return modelsView{}, err
	}
	read, err := a.estimateGPUs(ctx, cfg, -1, nil)
	if err != nil {
		return modelsView{}, err
	}
	gpus := read.gpus
	est := estimator.New(estimator.Config{CUDAContextBytes: cfg.Estimator.CUDAContext.Int64()}, nil)
	view := modelsView{Source: "local", ModelsDir: reg.Dir(), GPUs: gpus, Models: []modelView{}, Partial: reg.Partials()}
	for _, m := range reg.Models() {
		view.Models = append(view.Models, estimateModel(est, m, gpus))
	}
	return view, nil
}

func estimateModel(est *estimator.Estimator, m models.Model, gpus []estimator.GPUFree) modelView {
	v := modelView{Model: m}
	if m.MemoryBytes > 0 { // the entry's memory is what a lease for it gets
		v.Estimate = &modelEstimate{Source: "memory", TotalBytes: m.MemoryBytes, RecommendedBytes: m.MemoryBytes, GPUs: fitMemory(m.MemoryBytes, gpus)}
		return v
	}
	req, err := m.EstimateRequest()
	if err == nil {
		req.GPUs = gpus
		var res estimator.Result
		if res, err = est.Estimate(req); err == nil {
			v.Estimate = &modelEstimate{Source: "estimator", Precision: res.Precision, TotalBytes: res.TotalBytes,
				RecommendedBytes: res.RecommendedBytes, GPUs: res.GPUs}
		}
	}
	if err != nil && m.Available() {
		v.EstimateError = err.Error()
	}
	return v
}

// fitMemory is whether a fixed lease size fits on each GPU now and how many
// copies would.
func fitMemory(bytes int64, gpus []estimator.GPUFree) []estimator.GPUFit {
	out := make([]estimator.GPUFit, 0, len(gpus))
	for _, g := range gpus {
		f := estimator.GPUFit{Index: g.Index, Name: g.Name, AvailableBytes: g.AvailableBytes, RecommendedBytes: bytes, Copies: g.AvailableBytes / bytes}
		f.Sufficient = f.Copies > 0
		out = append(out, f)
	}
	return out
}

func writeModels(w io.Writer, v modelsView) error {
	fmt.Fprintf(w, "%d model(s); models_dir %s\n%s\n", len(v.Models), v.ModelsDir, v.Note)
	if len(v.Models) == 0 {
		fmt.Fprintln(w, "no models: add [[models.model]] entries, or `wsched models pull NAME` (tiny, base, small, medium, large-v3-turbo, …)")
	} else if err := modelsTable(v).render(w, "  "); err != nil {
		return err
	}
	switch {
	case len(v.Models) == 0:
	case len(v.GPUs) == 0:
		fmt.Fprintln(w, "gpus: none found; ESTIMATE is the memory each model needs on a GPU")
	default:
		fmt.Fprintln(w, "ESTIMATE is the recommended lease; GPU n: fits now (copies that would) or no")
	}
	for _, name := range v.Partial {
		fmt.Fprintf(w, "unfinished download: %s (`wsched models pull %s` resumes it)\n", name, name)
	}
	return nil
}

func modelsTable(v modelsView) *table {
	t := &table{header: []string{"NAME", "BACKEND", "SIZE", "ESTIMATE"}, right: map[int]bool{2: true, 3: true}}
	for _, g := range v.GPUs {
		t.header = append(t.header, fmt.Sprintf("GPU %d", g.Index))
	}
	t.header = append(t.header, "PATH")
	for _, m := range v.Models {
		row := []string{m.Name, m.Backend, dash(m.SizeBytes > 0, units.FormatBytes(m.SizeBytes)), "-"}
		if m.Estimate != nil {
			row[3] = units.FormatBytes(m.Estimate.RecommendedBytes)
		}
		for i := range v.GPUs {
			row = append(row, fitCell(m.Estimate, i))
		}
		t.add(append(row, m.Path), modelNotes(m)...)
	}
	return t
}

func dash(ok bool, s string) string {
	if !ok {
		return "-"
	}
	return s
}

func fitCell(e *modelEstimate, i int) string {
	if e == nil || i >= len(e.GPUs) {
		return "-"
	}
	if g := e.GPUs[i]; g.Sufficient {
		return fmt.Sprintf("yes ×%d", g.Copies)
	}
	return "no"
}

func modelNotes(m modelView) []string {
	var notes []string
	if m.Problem != "" {
		notes = append(notes, "! "+m.Problem)
	}
	if m.EstimateError != "" {
		notes = append(notes, "no estimate: "+m.EstimateError)
	}
	if m.Shadows != "" {
		notes = append(notes, "configured entry; hides "+m.Shadows)
	}
	return notes
}

// pullFlags are the options of `wsched models pull`.
type pullFlags struct {
	url, dir, sha1 string
	force          bool
	retries        int
}

func newModelsPullCmd(a *app) *cobra.Command {
	var f pullFlags
	cmd := &cobra.Command{
		Use:   "pull NAME",
		Short: "Download a whisper.cpp model into models_dir, with resume and SHA-1 check",
		Long: `Download the whisper.cpp model NAME as ggml-NAME.bin from [models] url
(default the whisper.cpp repository on Hugging Face) into [models] dir.
An interrupted download leaves ggml-NAME.bin.partial, which the next pull
resumes with an HTTP Range request. The finished file is checked against the
SHA-1 that whisper.cpp publishes; on a mismatch it is deleted and the command
fails naming both checksums. Models whisper.cpp publishes no checksum for
(most -q5_1 and -q8_0 files) are saved unverified unless --sha1 is given.

Names: ` + models.DefaultCatalog().Names(),
		Example: `  wsched models pull large-v3-turbo
  wsched models pull base.en --dir /srv/models --url http://mirror.local/whisper.cpp`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.modelsPull(cmd.Context(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "base URL to download ggml-NAME.bin from (default [models] url)")
	fl.StringVar(&f.dir, "dir", "", "directory to save into (default [models] dir)")
	fl.StringVar(&f.sha1, "sha1", "", "expected SHA-1 (hex), instead of the published one")
	fl.BoolVar(&f.force, "force", false, "download even if the file exists")
	fl.IntVar(&f.retries, "retries", 3, "further attempts after a dropped transfer, each resuming")
	return cmd
}

func (a *app) modelsPull(ctx context.Context, name string, f pullFlags) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	opts := models.PullOptions{Dir: cfg.Models.Dir, BaseURL: cfg.Models.URL, SHA1: f.sha1,
		Force: f.force, Retries: f.retries, Log: a.logger(cfg)}
	if f.url != "" {
		opts.BaseURL = f.url
	}
	if f.dir != "" {
		if opts.Dir, err = filepath.Abs(f.dir); err != nil {
			return fmt.Errorf("pull: --dir: %w", err)
		}
	}
	bar := newPullProgress(a.err, isTerminal(a.err), time.Now)
	opts.Progress = bar.update
	res, err := models.Pull(ctx, name, opts)
	bar.finish()
	if err != nil {
		return err
	}
	return writePullResult(a.out, res)
}

func writePullResult(w io.Writer, r models.PullResult) error {
	if r.Existed {
		_, err := fmt.Fprintf(w, "%s is already there (%s): %s; --force downloads it again\n", r.Model, units.FormatBytes(r.Bytes), r.Path)
		return err
	}
	check := "SHA-1 " + r.SHA1 + " verified"
	if !r.Verified {
		check = "SHA-1 " + r.SHA1 + "; no published checksum: not verified"
	}
	var resumed string
	if r.ResumedBytes > 0 {
		resumed = fmt.Sprintf(", resumed after %s", units.FormatBytes(r.ResumedBytes))
	}
	_, err := fmt.Fprintf(w, "saved %s: %s (%s%s, %s)\n", r.Model, r.Path, units.FormatBytes(r.Bytes), resumed, check)
	return err
}

// pullProgress draws a download's progress: on a terminal one bar redrawn
// in place at most every barInterval (bytes, %, rate, ETA); otherwise a
// plain line at each tenth of the file (each plainStep bytes when the size
// is unknown).
type pullProgress struct {
	w          io.Writer
	tty        bool
	now        func() time.Time
	attempt    int
	start      time.Time // of the current attempt
	startBytes int64
	lastDraw   time.Time
	nextLine   int64 // plain mode: the byte count that prints the next line
	drawn      bool  // a bar is on the screen
}

const (
	barInterval = 100 * time.Millisecond
	plainStep   = 64 << 20
	barWidth    = 30
)

func newPullProgress(w io.Writer, tty bool, now func() time.Time) *pullProgress {
	return &pullProgress{w: w, tty: tty, now: now}
}

func (p *pullProgress) update(pr models.Progress) {
	t := p.now()
	if pr.Attempt != p.attempt || pr.Bytes < p.startBytes {
		p.attempt, p.start, p.startBytes = pr.Attempt, t, pr.Bytes
		p.nextLine = 0
		if pr.ResumedBytes > 0 && !pr.Verifying {
			p.line(fmt.Sprintf("%s: resuming at %s", pr.Model, units.FormatBytes(pr.ResumedBytes)))
		}
	}
	if pr.Verifying {
		p.line(fmt.Sprintf("%s: %s downloaded; verifying SHA-1", pr.Model, units.FormatBytes(pr.Bytes)))
		return
	}
	if p.tty {
		if t.Sub(p.lastDraw) >= barInterval || pr.Bytes == pr.TotalBytes {
			p.lastDraw = t
			fmt.Fprintf(p.w, "\r%s\x1b[K", p.status(pr, t, true))
			p.drawn = true
		}
		return
	}
	if pr.Bytes >= p.nextLine {
		fmt.Fprintln(p.w, p.status(pr, t, false))
		p.nextLine = p.nextStep(pr)
	}
}

// nextStep is the byte count of the next plain line after pr.
func (p *pullProgress) nextStep(pr models.Progress) int64 {
	if pr.TotalBytes <= 0 {
		return (pr.Bytes/plainStep + 1) * plainStep
	}
	tenth := max(pr.TotalBytes/10, 1)
	return min((pr.Bytes/tenth+1)*tenth, pr.TotalBytes)
}

// line prints a line of its own, below a bar if one is drawn.
func (p *pullProgress) line(s string) {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
	fmt.Fprintln(p.w, s)
}

func (p *pullProgress) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// status is "NAME [====>   ] 45% 33.50 MiB of 74.10 MiB, 12.30 MiB/s, ETA 3s"
// (no bar in plain mode; no %, total or ETA when the size is unknown).
func (p *pullProgress) status(pr models.Progress, t time.Time, bar bool) string {
	var b strings.Builder
	b.WriteString(pr.Model + ":")
	rate := -1.0
	if el := t.Sub(p.start).Seconds(); el > 0 {
		rate = float64(pr.Bytes-p.startBytes) / el
	}
	if pr.TotalBytes > 0 {
		frac := float64(pr.Bytes) / float64(pr.TotalBytes)
		if bar {
			n := int(frac * barWidth)
			fmt.Fprintf(&b, " [%s%s]", strings.Repeat("=", n), strings.Repeat(" ", barWidth-n))
		}
		fmt.Fprintf(&b, " %3.0f%% %s of %s", 100*frac, units.FormatBytes(pr.Bytes), units.FormatBytes(pr.TotalBytes))
	} else {
		fmt.Fprintf(&b, " %s", units.FormatBytes(pr.Bytes))
	}
	if rate > 0 {
		fmt.Fprintf(&b, ", %s/s", units.FormatBytes(int64(rate)))
		if pr.TotalBytes > 0 && pr.Bytes < pr.TotalBytes {
			eta := time.Duration(float64(pr.TotalBytes-pr.Bytes) / rate * float64(time.Second))
			fmt.Fprintf(&b, ", ETA %s", eta.Round(time.Second))
		}
	}
	return b.String()
}
