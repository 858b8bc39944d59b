package daemon

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/jobs/transcript"
	"github.com/wsched/wsched/models"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/host"
)

// whisperBestOf is whisper.cpp's default best_of with temperature fallback,
// which the whisper backend keeps: a fallback re-allocates the KV self cache
// for best_of + 2 decoders, so leases reserve for it.
const whisperBestOf = 5

// whisperFlashAttention is how whisper.cpp models are loaded, and sized:
// flash attention shrinks the encoder's compute buffer (tiny: 64.8 → 17.7 MB
// on the CPU) and is whisper.cpp's own default.
const whisperFlashAttention = true

// executor runs one attempt of a job: the model from the registry, its
// memory from the estimator (raised after an OOM), a backend instance from
// the host under a lease of that size (waiting in the placement queue), and
// the transcription.
type executor struct{ d *Daemon }

var _ jobs.Executor = executor{}

// pluginFor names the backend executable that serves a model's backend
// (wsched-backend-NAME): the whisper.cpp estimator profile is served by
// wsched-backend-whisper.
func pluginFor(backend string) string {
	if backend == models.WhisperCpp {
		return "whisper"
	}
	return backend
}

// Execute implements jobs.Executor.
func (x executor) Execute(ctx context.Context, job jobs.Job, r jobs.Reporter) (transcript.Transcript, error) {
	m, err := x.d.lookupModel(ctx, job.Spec.Model)
	if err != nil {
		return transcript.Transcript{}, err
	}
	bytes, key, err := x.d.sizeJob(m, job)
	if err != nil {
		return transcript.Transcript{}, err
	}
	wait := time.Hour
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	inst, release, err := x.d.host.Acquire(ctx, host.Spec{
		Backend: pluginFor(m.Backend), Load: loadRequest(m),
		MemoryBytes: bytes, Priority: job.Spec.Priority, KeepAlive: job.Spec.KeepAlive, Wait: wait,
		Labels: map[string]string{labelEstimateKey: keyLabel(key), "wsched.job": job.ID},
	})
	if err != nil {
		return transcript.Transcript{}, jobFailure("start backend", err)
	}
	defer release()
	l := inst.Lease()
	r.Placed(jobs.Placement{Backend: inst.Backend(), GPUIndex: l.GPUIndex, GPUUUID: l.GPU, LeaseID: l.ID, MemoryBytes: l.Bytes})
	r.Processing()
	res, err := inst.Transcribe(ctx, transcribeRequest(job), func(ev plugins.Event) error {
		switch ev.Kind {
		case plugins.EventProgress:
			r.Progress(ev.Percent)
		case plugins.EventSegment:
			r.Segment(transcript.Segment{ID: ev.Segment.Index, Start: ev.Segment.Start, End: ev.Segment.End, Text: ev.Segment.Text})
		}
		return nil
	})
	if err != nil {
		switch {
		case ctx.Err() != nil:
			inst.Discard("its job was cancelled or timed out")
		case errors.Is(err, plugins.ErrOutOfMemory):
			inst.Discard("it ran out of memory") // whisper.cpp is not usable after a failed allocation
		}
		return transcript.Transcript{}, jobFailure("transcribe", err)
	}
	if job.OOMFactor > 1 {
		x.d.learnRaised(key, bytes)
	}
	return toTranscript(job, res), nil
}

// loadRequest is how a model is loaded; sizeJob estimates for the same.
func loadRequest(m models.Model) plugins.LoadRequest {
	return plugins.LoadRequest{ModelPath: m.Path, FlashAttention: m.Backend == models.WhisperCpp && whisperFlashAttention}
}

func transcribeRequest(job jobs.Job) plugins.TranscribeRequest {
	req := plugins.TranscribeRequest{AudioPath: job.Spec.AudioPath, Language: job.Spec.Language, Translate: job.Spec.Translate, InitialPrompt: job.Spec.Prompt}
	if job.Spec.Temperature > 0 {
		req.Extra = map[string]string{"temperature": strconv.FormatFloat(job.Spec.Temperature, 'f', -1, 64)}
	}
	return req
}

func toTranscript(job jobs.Job, res plugins.Result) transcript.Transcript {
	t := transcript.Transcript{Task: "transcribe", Language: res.Language, Duration: res.Duration, Text: res.Text}
	if job.Spec.Translate {
		t.Task = "translate"
	}
	for i, s := range res.Segments {
		t.Segments = append(t.Segments, transcript.Segment{ID: i, Start: s.Start, End: s.End, Text: s.Text})
	}
	return t
}

// lookupModel finds a model in a fresh scan of the registry (models pulled
// while the daemon runs are served at once). Unknown or unusable models are
// the client's problem: not retried.
func (d *Daemon) lookupModel(ctx context.Context, name string) (models.Model, error) {
	reg, err := models.Load(ctx, d.cfg.Models)
	if err != nil {
		return models.Model{}, fmt.Errorf("model registry: %w", err)
	}
	m, err := reg.Lookup(name)
	if err != nil {
		return models.Model{}, jobs.Mark(err, jobs.ErrBadInput)
	}
	return m, nil
}

// sizeJob is the lease size for a job: the estimator's recommendation
// (learned peaks included) for the model, reserving whisper.cpp's fallback
// decoders, scaled by the job's OOM factor (1.5 per out-of-memory retry).
// Nothing is learned during the retries, so the factor applies to the same
// estimate each time: E, 1.5 E, 2.25 E, …
func (d *Daemon) sizeJob(m models.Model, job jobs.Job) (int64, estimator.Key, error) {
	if m.MemoryBytes > 0 { // configured: the operator knows best
		key := estimator.Key{Backend: estimator.Backend(m.Backend), Model: m.Name}
		return int64(float64(m.MemoryBytes) * max(1, job.OOMFactor)), key, nil
	}
	req, err := m.EstimateRequest()
	if err != nil {
		return 0, estimator.Key{}, jobs.Mark(fmt.Errorf("size job: %w (set memory in the model's [[models.model]] entry)", err), jobs.ErrBadInput)
	}
	if req.Backend == estimator.WhisperCpp {
		fa := loadRequest(m).FlashAttention
		req.BestOf, req.FlashAttention = whisperBestOf, &fa
	}
	res, err := d.estimateAnyGPU(req)
	if err != nil {
		return 0, estimator.Key{}, jobs.Mark(fmt.Errorf("size job: %w", err), jobs.ErrBadInput)
	}
	bytes := res.RecommendedBytes
	if job.OOMFactor > 1 {
		bytes = int64(float64(bytes) * job.OOMFactor)
	}
	return bytes, res.Key, nil
}

// learnRaised records, after a job needed out-of-memory retries to
// complete, the lease size that finally worked, so later estimates for the
// same key start there instead of at the size that failed.
func (d *Daemon) learnRaised(key estimator.Key, bytes int64) {
	if err := d.db.RecordPeak(key, bytes); err != nil {
		d.log.Warn("cannot record a raised estimate for learning", "err", err)
	}
}

// jobFailure classifies a backend or placement error for the job manager:
// crashes retry, OOM retries bigger, bad input and unknown backends fail.
func jobFailure(op string, err error) error {
	err = fmt.Errorf("%s: %w", op, err)
	switch {
	case errors.Is(err, plugins.ErrOutOfMemory):
		return jobs.Mark(err, jobs.ErrOutOfMemory)
	case errors.Is(err, plugins.ErrUnavailable):
		return jobs.Mark(err, jobs.ErrRetryable)
	case errors.Is(err, plugins.ErrBadAudio), errors.Is(err, plugins.ErrModelNotFound), errors.Is(err, plugins.ErrBadModel),
		errors.Is(err, plugins.ErrBadRequest), errors.Is(err, host.ErrUnknownBackend), errors.Is(err, placement.ErrTooLarge),
		errors.Is(err, placement.ErrNoSuchGPU):
		return jobs.Mark(err, jobs.ErrBadInput)
	}
	return err
}
