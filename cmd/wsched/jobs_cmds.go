package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/jobs/transcript"
)

// cliFormats maps --format to the job's format and the output extension.
var cliFormats = map[string]struct{ format, ext string }{
	"txt": {"text", ".txt"}, "srt": {"srt", ".srt"}, "vtt": {"vtt", ".vtt"}, "json": {"verbose_json", ".json"},
}

type transcribeFlags struct {
	model, language, format, priority, output, prompt string
	translate, upload                                 bool
	vad                                               api.VADOptions
}

// addVADFlags adds --vad and its tuning flags; set fills o from them.
func addVADFlags(cmd *cobra.Command, o *api.VADOptions) (set func()) {
	fl := cmd.Flags()
	on := fl.Bool("vad", false, "skip non-speech with voice activity detection (--vad=false: off even where the model turns it on)")
	fl.StringVar(&o.VADModel, "vad-model", "", "VAD model: a file in the daemon's [models] dir (default: the model entry's vad_model)")
	fl.Float64Var(&o.VADThreshold, "vad-threshold", 0, "speech probability threshold, 0 to 1 (default: the backend's)")
	minSpeech := fl.Duration("vad-min-speech", 0, "drop speech shorter than this")
	minSilence := fl.Duration("vad-min-silence", 0, "silence that ends a speech segment")
	maxSpeech := fl.Duration("vad-max-speech", 0, "split speech segments longer than this")
	pad := fl.Duration("vad-speech-pad", 0, "padding kept around speech segments")
	return func() {
		if fl.Changed("vad") {
			o.VAD = on
		}
		o.VADMinSpeechMS, o.VADMinSilenceMS, o.VADSpeechPadMS = int(minSpeech.Milliseconds()), int(minSilence.Milliseconds()), int(pad.Milliseconds())
		o.VADMaxSpeechS = maxSpeech.Seconds()
	}
}

func newTranscribeCmd(a *app) *cobra.Command {
	var f transcribeFlags
	var setVAD func()
	cmd := &cobra.Command{
		Use:   "transcribe FILE...",
		Short: "Transcribe audio files through the daemon's job queue",
		Long: `Submit one job per file (they queue by priority for GPU memory), follow them with a
progress bar per file on a terminal (plain lines otherwise), and write each result:
to --output DIR as NAME.EXT, or to stdout for a single file without --output. NAME
is the file's name without its extension; files that share it keep their whole
name (jfk.wav and jfk.mp3 → jfk.wav.srt and jfk.mp3.srt), and two files of the
same name (a/jfk.wav, b/jfk.wav) are refused before anything is submitted. Each
file is opened here and its descriptor passed to the daemon over the Unix socket
(SCM_RIGHTS), so the daemon reads exactly what you may read; --upload streams it.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if _, ok := cliFormats[f.format]; !ok {
				return fmt.Errorf("--format %q: want txt, srt, vtt or json", f.format)
			}
			if len(files) > 1 && f.output == "" {
				return fmt.Errorf("%d files need --output DIR", len(files))
			}
			setVAD()
			if _, err := outputPaths(files, f.output, cliFormats[f.format].ext); err != nil {
				return err
			}
			return a.transcribe(cmd.Context(), files, f)
		},
	}
	cmd.Flags().StringVar(&f.model, "model", "", "model to use (default: [models] default)")
	cmd.Flags().StringVar(&f.language, "language", "", "spoken language (ISO 639-1, e.g. en); default: detect")
	cmd.Flags().StringVar(&f.format, "format", "txt", "output format: txt, srt, vtt or json")
	cmd.Flags().StringVar(&f.priority, "priority", "normal", "high, normal or low")
	cmd.Flags().StringVar(&f.output, "output", "", "directory for the results (NAME.EXT)")
	cmd.Flags().StringVar(&f.prompt, "prompt", "", "initial prompt (names, spelling)")
	cmd.Flags().BoolVar(&f.translate, "translate", false, "translate to English")
	cmd.Flags().BoolVar(&f.upload, "upload", false, "upload the files instead of passing their open descriptors")
	setVAD = addVADFlags(cmd, &f.vad)
	return cmd
}

// fileJob is one file's job as transcribe follows it.
type fileJob struct {
	file string
	out  string // where its result goes; "" for stdout
	job  api.Job
	line string
}

// outputPaths names each file's result in dir (none without dir): NAME.EXT
// with NAME the file's name less its extension, or the whole file name
// where files share that stem. Files of the same name are an error: one
// result would overwrite the other.
func outputPaths(files []string, dir, ext string) ([]string, error) {
	if dir == "" {
		return make([]string, len(files)), nil
	}
	stem := func(f string) string { return strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)) }
	stems, names := map[string]int{}, map[string]string{}
	for _, f := range files {
		stems[stem(f)]++
		if prev, dup := names[filepath.Base(f)]; dup {
			return nil, fmt.Errorf("%s and %s would both write %s: transcribe them into different --output directories",
				prev, f, filepath.Join(dir, filepath.Base(f)+ext))
		}
		names[filepath.Base(f)] = f
	}
	out, by := make([]string, len(files)), map[string]string{}
	for i, f := range files {
		name := stem(f)
		if stems[name] > 1 {
			name = filepath.Base(f)
		}
		out[i] = filepath.Join(dir, name+ext)
		if prev, dup := by[out[i]]; dup { // jfk.wav, jfk.mp3 and jfk.wav.flac
			return nil, fmt.Errorf("%s and %s would both write %s: transcribe them into different --output directories", prev, f, out[i])
		}
		by[out[i]] = f
	}
	return out, nil
}

func (a *app) transcribe(ctx context.Context, files []string, f transcribeFlags) error {
	c, _, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	if f.output != "" {
		if err := os.MkdirAll(f.output, 0o755); err != nil {
			return err
		}
	}
	outs, err := outputPaths(files, f.output, cliFormats[f.format].ext)
	if err != nil {
		return err
	}
	var fjs []*fileJob
	for i, file := range files {
		j, err := submitFile(ctx, c, file, f)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		fjs = append(fjs, &fileJob{file: file, out: outs[i], job: j})
	}
	view := newJobsProgress(a.err, isTerminal(a.err), fjs)
	failed := 0
	for _, fj := range fjs {
		done, err := followJob(ctx, c, fj.job.ID, func(ev api.JobEvent) { view.update(fj, ev) }, a.err)
		if err != nil {
			return fmt.Errorf("%s: %w", fj.file, err)
		}
		fj.job = done
		if werr := a.writeResult(fj, f); werr != nil {
			return werr
		}
		if done.State != api.JobCompleted {
			failed++
		}
		view.finish(fj)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d files failed", failed, len(fjs))
	}
	return nil
}

func submitFile(ctx context.Context, c *client.Client, file string, f transcribeFlags) (api.Job, error) {
	req := api.JobRequest{Model: f.model, Language: f.language, Format: cliFormats[f.format].format, Priority: f.priority,
		Translate: f.translate, Prompt: f.prompt, VADOptions: f.vad}
	if !f.upload {
		return c.PassJob(ctx, file, req)
	}
	return c.UploadJob(ctx, file, req)
}

// followJob streams a job's events until it finishes and returns it. When
// the daemon goes away (a restart, a crash: the job is kept and runs on) it
// re-attaches to the job by its ID once the daemon answers again (polled
// with backoff for up to reattachWithin), saying so once each way.
func followJob(ctx context.Context, c *client.Client, id string, on func(api.JobEvent), log io.Writer) (api.Job, error) {
	lost := false
	for {
		err := c.JobEvents(ctx, id, func(ev api.JobEvent) error { on(ev); return nil })
		if ctx.Err() != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = c.CancelJob(cctx, id)
			return api.Job{}, ctx.Err()
		}
		j, jerr := c.Job(ctx, id)
		switch {
		case jerr == nil && j.State.Finished():
			return j, nil
		case jerr == nil && err != nil && !restarting(err):
			return api.Job{}, err
		case jerr != nil && !restarting(jerr):
			return api.Job{}, jerr
		case jerr != nil:
			if !lost {
				fmt.Fprintf(log, "wsched: lost the daemon while following job %s (%v); re-attaching once it is back\n", id, jerr)
				lost = true
			}
			if werr := waitDaemon(ctx, c, time.Now().Add(reattachWithin)); werr != nil {
				return api.Job{}, fmt.Errorf("job %s: %w; it may still run: `wsched job %s`", id, werr, id)
			}
			fmt.Fprintf(log, "wsched: the daemon is back; re-attached to job %s\n", id)
			lost = false
			continue
		}
		select { // the stream ended early (the daemon is stopping): follow again
		case <-ctx.Done():
		case <-time.After(backoffFirst):
		}
	}
}

// reattachWithin bounds how long transcribe waits for a daemon that went
// away while it followed a job.
const reattachWithin = 2 * time.Minute

// writeResult writes a completed job's result to its output file or
// stdout; a failed job's reason is its progress line's (jobsProgress.finish).
func (a *app) writeResult(fj *fileJob, f transcribeFlags) error {
	j := fj.job
	if j.State != api.JobCompleted || j.Result == nil {
		return nil
	}
	_, body, err := transcript.Render(cliFormats[f.format].format, *j.Result)
	if err != nil {
		return err
	}
	if f.output == "" {
		_, err = a.out.Write(body)
		return err
	}
	if err := os.WriteFile(fj.out, body, 0o644); err != nil {
		return err
	}
	fj.line = "→ " + fj.out
	return nil
}

// jobsProgress shows one line per file: a bar redrawn in place on a
// terminal, plain lines on state changes otherwise.
type jobsProgress struct {
	w     io.Writer
	tty   bool
	files []*fileJob
	last  map[*fileJob]string
	drawn bool
}

func newJobsProgress(w io.Writer, tty bool, files []*fileJob) *jobsProgress {
	return &jobsProgress{w: w, tty: tty, files: files, last: map[*fileJob]string{}}
}

func (p *jobsProgress) update(fj *fileJob, ev api.JobEvent) {
	fj.job = ev.Job
	if ev.Type == api.JobEventState {
		fj.job.State = ev.State
	}
	if ev.Type == api.JobEventProgress {
		fj.job.Progress = ev.Progress
	}
	p.show(fj, false)
}

// finish shows a file's final line, once its result is written.
func (p *jobsProgress) finish(fj *fileJob) { p.show(fj, true) }

func (p *jobsProgress) show(fj *fileJob, final bool) {
	line := describeJob(fj)
	if !p.tty {
		state := string(fj.job.State)
		if fj.job.State.Finished() && !final {
			return // finish prints it, with where the result went
		}
		if p.last[fj] != state {
			p.last[fj] = state
			fmt.Fprintln(p.w, line)
		}
		return
	}
	if p.drawn {
		fmt.Fprintf(p.w, "\x1b[%dA", len(p.files))
	}
	for _, f := range p.files {
		fmt.Fprintf(p.w, "\x1b[2K%s\n", describeJob(f))
	}
	p.drawn = true
}

func describeJob(fj *fileJob) string {
	j := fj.job
	where := ""
	if j.GPUIndex >= 0 && j.LeaseID != "" {
		where = fmt.Sprintf(" GPU %d", j.GPUIndex)
	}
	switch j.State {
	case api.JobProcessing:
		return fmt.Sprintf("%s: %s %3.0f%%%s", fj.file, bar(j.Progress, 20), j.Progress, where)
	case api.JobCompleted:
		return fmt.Sprintf("%s: completed%s %s", fj.file, where, fj.line)
	case api.JobFailed, api.JobCancelled:
		return fmt.Sprintf("%s: %s: %s", fj.file, j.State, j.Error)
	}
	return fmt.Sprintf("%s: %s%s", fj.file, j.State, where)
}

func bar(pct float64, width int) string {
	n := int(pct / 100 * float64(width))
	n = min(max(n, 0), width)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

func newJobsCmd(a *app) *cobra.Command {
	var asJSON, trace bool
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List transcription jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			if trace {
				return c.JobsTrace(cmd.Context(), a.out)
			}
			js, err := c.Jobs(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(js)
			}
			return renderJobs(a.out, js)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's job objects")
	cmd.Flags().BoolVar(&trace, "trace", false, "print the job history and the lease events as a trace for `wsched sim --trace` (GET /v1/jobs/trace, JSON Lines)")
	return cmd
}

func renderJobs(w io.Writer, js []api.Job) error {
	if len(js) == 0 {
		_, err := fmt.Fprintln(w, "no jobs")
		return err
	}
	t := &table{header: []string{"ID", "STATE", "MODEL", "PRIORITY", "PROGRESS", "GPU", "MEMORY", "ATTEMPTS", "AGE"},
		right: map[int]bool{4: true, 6: true, 7: true}}
	for _, j := range js {
		gpu := "-"
		if j.GPUIndex >= 0 && j.LeaseID != "" {
			gpu = fmt.Sprint(j.GPUIndex)
		}
		var notes []string
		if j.Error != "" {
			notes = append(notes, j.Error)
		}
		if n := jobNote(j); n != "" { // expected start, chunks (as in top)
			notes = append(notes, n)
		}
		t.add([]string{j.ID, string(j.State), j.Spec.Model, j.Spec.Priority, fmt.Sprintf("%.0f%%", j.Progress), gpu,
			units.FormatBytes(j.MemoryBytes), fmt.Sprint(j.Attempts), time.Since(j.Created).Round(time.Second).String()}, notes...)
	}
	return t.render(w, "  ")
}

func newJobCmd(a *app) *cobra.Command {
	var follow, asJSON bool
	cmd := &cobra.Command{
		Use:   "job ID",
		Short: "Show a job (with --follow: its events until it finishes)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			if follow {
				err := c.JobEvents(cmd.Context(), args[0], func(ev api.JobEvent) error {
					if asJSON {
						return a.printJSON(ev)
					}
					_, err := fmt.Fprintln(a.out, jobEventLine(ev))
					return err
				})
				if err != nil || asJSON {
					return err
				}
			}
			j, err := c.Job(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(j)
			}
			return renderJob(a.out, j)
		},
	}
	cmd.Flags().BoolVar(&follow, "follow", false, "stream the job's events until it finishes")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func jobEventLine(ev api.JobEvent) string {
	switch ev.Type {
	case api.JobEventState:
		return fmt.Sprintf("%s state %s", ev.Time.Format("15:04:05.000"), ev.State)
	case api.JobEventProgress:
		return fmt.Sprintf("%s progress %.0f%%", ev.Time.Format("15:04:05.000"), ev.Progress)
	case api.JobEventSegment:
		return fmt.Sprintf("%s segment [%s → %s] %s", ev.Time.Format("15:04:05.000"), ev.Segment.Start, ev.Segment.End, strings.TrimSpace(ev.Segment.Text))
	}
	return string(ev.Type)
}

func renderJob(w io.Writer, j api.Job) error {
	fmt.Fprintf(w, "job %s: %s (attempt %d), model %s, priority %s\n", j.ID, j.State, j.Attempts, j.Spec.Model, j.Spec.Priority)
	fmt.Fprintf(w, "audio %s\n", j.Spec.AudioPath)
	if j.LeaseID != "" {
		fmt.Fprintf(w, "placed on GPU %d (%s) by lease %s, %s, backend %s\n", j.GPUIndex, j.GPUUUID, j.LeaseID, units.FormatBytes(j.MemoryBytes), j.Backend)
	}
	for _, h := range j.History {
		fmt.Fprintf(w, "  %s  %s (attempt %d)\n", h.Time.Format("15:04:05.000"), h.State, h.Attempt)
	}
	if j.Error != "" {
		fmt.Fprintf(w, "error: %s\n", j.Error)
	}
	if j.Result != nil {
		fmt.Fprintf(w, "language %s, %s of audio:\n%s\n", j.Result.Language, j.Result.Duration, strings.TrimSpace(j.Result.Text))
	}
	return nil
}

func newCancelCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a queued or running job, or delete a finished one",
		Long: `Cancel a queued or running job: it stops, and stays listed as cancelled until the
daemon's [jobs] result_ttl. A finished job (completed, failed or cancelled) is
deleted with its result instead, which frees its place under [limits]
stored_jobs and [jobs] max_jobs; so cancel twice to remove a running job.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := a.client()
			if err != nil {
				return err
			}
			j, err := c.CancelJob(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if j.Deleted {
				_, err = fmt.Fprintf(a.out, "%s deleted (it was %s)\n", j.ID, j.State)
				return err
			}
			_, err = fmt.Fprintf(a.out, "%s %s\n", j.ID, j.State)
			return err
		},
	}
}
