// Package runner executes transcription jobs for the job manager: it finds
// the model, sizes its lease with the estimator (raised after an
// out-of-memory retry), runs the transcription on a backend instance from the
// plugin host, and classifies failures for the manager's retry policy.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/jobs/transcript"
	"github.com/wsched/wsched/models"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/descriptor"
	"github.com/wsched/wsched/plugins/host"
)

// Backends hands out backend instances under leases and says which
// backends there are (*host.Host).
type Backends interface {
	Acquire(ctx context.Context, spec host.Spec) (*host.Instance, func(), error)
	Descriptors(ctx context.Context) (descriptor.Set, error)
}

// Learner records lease sizes that proved right (*store.DB).
type Learner interface {
	RecordPeak(k estimator.Key, bytes int64) error
}

var _ Backends = (*host.Host)(nil)

// Options configures a Runner; Log may be nil.
type Options struct {
	// Models is where the model registry is configured.
	Models   config.Models
	Backends Backends
	Sizer    *Sizer
	Learn    Learner
	Log      *slog.Logger
	// Bounds are [jobs] max_segments and max_result_bytes.
	Bounds ResultBounds
}

// Runner runs one attempt of a job: the model from the registry, its memory
// from the estimator (raised after an OOM), a backend instance from the host
// under a lease of that size (waiting in the placement queue), and the
// transcription.
type Runner struct {
	models   config.Models
	backends Backends
	sizer    *Sizer
	learn    Learner
	log      *slog.Logger
	bounds   ResultBounds
}

var _ jobs.Executor = (*Runner)(nil)

// New returns a Runner.
func New(opts Options) *Runner {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{models: opts.Models, backends: opts.Backends, sizer: opts.Sizer, learn: opts.Learn, log: log, bounds: opts.Bounds}
}

// Execute implements jobs.Executor.
func (r *Runner) Execute(ctx context.Context, job jobs.Job, rep jobs.Reporter) (transcript.Transcript, error) {
	m, err := r.lookupModel(ctx, job.Spec.Model)
	if err != nil {
		return transcript.Transcript{}, err
	}
	if !m.Descriptor.VAD && vadOn(m, job) {
		return transcript.Transcript{}, jobs.Mark(fmt.Errorf("model %q (backend %s): voice activity detection is not available: the backend gets the audio as it is (submit without vad)",
			m.Name, m.Backend), jobs.ErrBadInput)
	}
	if err := checkJobOptions(m, job); err != nil {
		return transcript.Transcript{}, err
	}
	z, err := r.size(m, job)
	bytes, key := z.Bytes, z.Key
	if err != nil {
		return transcript.Transcript{}, err
	}
	wait := time.Hour
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	granted := placement.Lease{Bytes: bytes, GPUIndex: -1} // until OnGranted says where
	spec := host.Spec{
		Backend: m.Descriptor.Plugin, Load: r.loadRequest(m, job),
		MemoryBytes: bytes, Priority: job.Spec.Priority, KeepAlive: job.Spec.KeepAlive, Wait: wait,
		MaxStreams: m.Streams(), StreamBytes: z.StreamBytes,
		Labels: map[string]string{"wsched.job": job.ID}, EstimateKey: &key,
		OnGranted: func(l placement.Lease) { // the attempt counts from here, not while it waits
			granted = l
			rep.Placed(jobs.Placement{Backend: l.Labels[host.LabelBackend], GPUIndex: l.GPUIndex, GPUUUID: l.GPU, LeaseID: l.ID, MemoryBytes: l.Bytes})
		},
	}
	if m.Descriptor.CPUOnly() {
		onCPU(&spec, m)
	}
	inst, release, err := r.backends.Acquire(ctx, spec)
	if err != nil {
		if errors.Is(err, plugins.ErrOutOfMemory) { // at Load: no instance to ask
			return transcript.Transcript{}, r.outOfMemory(m, job, granted, plugins.MemoryReport{}, jobFailure("start backend", err))
		}
		return transcript.Transcript{}, jobFailure("start backend", err)
	}
	defer release()
	l := inst.Lease()
	rep.Processing()
	tally := r.bounds.tally()
	res, err := inst.Transcribe(ctx, transcribeRequest(m, job), func(ev plugins.Event) error {
		switch ev.Kind {
		case plugins.EventProgress:
			rep.Progress(ev.Percent)
		case plugins.EventSegment:
			if err := tally.segment(ev.Segment.Text); err != nil {
				return err // the call is cancelled: the backend stops
			}
			rep.Segment(transcript.Segment{ID: ev.Segment.Index, Start: ev.Segment.Start, End: ev.Segment.End, Text: ev.Segment.Text})
		}
		return nil
	})
	if tally.err != nil { // stopped at the bound: say that, not how the call ended
		return transcript.Transcript{}, tally.err
	}
	if err == nil {
		if err := r.bounds.check(res); err != nil {
			return transcript.Transcript{}, err
		}
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			// A shared instance whose job was cancelled is kept: the aborted
			// call had a state of its own, and others' streams run there. A
			// timeout may mean a wedged backend: it goes either way.
			if m.Streams() <= 1 || errors.Is(ctx.Err(), context.DeadlineExceeded) {
				inst.Discard("its job was cancelled or timed out")
			}
		case errors.Is(err, plugins.ErrOutOfMemory):
			inst.Discard("it ran out of memory") // whisper.cpp is not usable after a failed allocation
			if m.Streams() > 1 {
				l.Bytes = bytes // the lease serves other streams too: grow from this job's own size
			}
			return transcript.Transcript{}, r.outOfMemory(m, job, l, inst.Memory(), jobFailure("transcribe", err))
		}
		if errors.Is(err, plugins.ErrBadAudio) {
			return transcript.Transcript{}, badAudio(err, job.Spec.AudioPath)
		}
		return transcript.Transcript{}, jobFailure("transcribe", err)
	}
	r.learnStream(key, l, res.StreamMemory)
	if job.OOMFactor > 1 {
		r.learnRaised(key, bytes)
		if m.MemoryBytes > 0 && bytes > m.MemoryBytes {
			r.log.Warn("model entry's memory is too small: set it to the measured figure", "model", m.Name,
				"memory", m.MemoryBytes, "measured", bytes, "job", job.ID)
		}
	}
	return toTranscript(job, res), nil
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

// onCPU places spec on the CPU: its backend cannot use CUDA in this build
// (sherpa-onnx's bundled ONNX Runtime, say), so it leases no GPU memory;
// the lease's label says why.
func onCPU(spec *host.Spec, m models.Model) {
	spec.Device, spec.MemoryBytes, spec.StreamBytes, spec.EstimateKey = device.Spec{Kind: device.CPU}, 0, 0, nil
	spec.Labels[LabelDevice] = fmt.Sprintf("cpu: backend %s cannot use CUDA in this build (devices: %s)", m.Backend, strings.Join(m.Descriptor.Devices, ", "))
}

// LabelDevice is the lease label that says why an instance runs where it
// does, when its backend decided it (a CPU-only build).
const LabelDevice = "wsched.device"

// lookupModel finds a model in a fresh scan of the registry (models pulled
// while the daemon runs are served at once), with the backends the host
// discovered. Unknown or unusable models are the client's problem: not
// retried.
func (r *Runner) lookupModel(ctx context.Context, name string) (models.Model, error) {
	set, err := r.backends.Descriptors(ctx)
	if err != nil {
		return models.Model{}, fmt.Errorf("backends: %w", err)
	}
	reg, err := models.Load(ctx, r.models, set)
	if err != nil {
		return models.Model{}, fmt.Errorf("model registry: %w", err)
	}
	m, err := reg.Lookup(name)
	if err != nil {
		return models.Model{}, jobs.Mark(err, jobs.ErrBadInput)
	}
	return m, nil
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
