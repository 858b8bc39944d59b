// Package jobs runs transcription jobs through the seed scheduler's
// lifecycle — pending → loading → processing → completed | failed, or
// cancelled — with priorities, retries on backend crashes and CUDA OOM,
// timeouts and progress, durably: jobs and results live in the daemon's
// store, queued jobs resume after a restart and running ones are retried.
// Placement and execution are behind the Executor interface (jobs/runner
// implements it over the estimator, the placement engine and the backend
// host).
package jobs

import (
	"errors"
	"time"

	"github.com/wsched/wsched/jobs/transcript"
	"github.com/wsched/wsched/placement"
)

// Sentinel errors.
var (
	ErrNotFound    = errors.New("no such job")
	ErrInvalid     = errors.New("invalid job")
	ErrFinished    = errors.New("job already finished")
	ErrTimeout     = errors.New("job timed out")
	ErrCancelled   = errors.New("job cancelled")
	ErrStopped     = errors.New("job manager stopped")
	ErrQueueFull   = errors.New("too many jobs")
	ErrLimit       = errors.New("job limit reached") // an owner's OwnerLimits
	ErrRetryable   = errors.New("retryable failure") // wrap to retry (backend crash)
	ErrOutOfMemory = errors.New("out of GPU memory") // wrap to retry with a larger lease
	// ErrBadInput marks failures the client caused (bad audio, an unknown
	// model or backend): they are not retried.
	ErrBadInput = errors.New("bad input")
)

// State is a job's place in its lifecycle.
type State string

// Job states.
const (
	Pending    State = "pending"
	Loading    State = "loading"
	Processing State = "processing"
	Completed  State = "completed"
	Failed     State = "failed"
	Cancelled  State = "cancelled"
)

// Finished reports whether the state is terminal.
func (s State) Finished() bool { return s == Completed || s == Failed || s == Cancelled }

// Spec is what a client asks for.
type Spec struct {
	// AudioPath is a file on the daemon's file system (already checked to
	// be readable by the requesting user, or an upload the daemon owns).
	AudioPath string `json:"audio_path"`
	// Uploaded marks an AudioPath the daemon wrote; it is deleted with the job.
	Uploaded bool   `json:"uploaded,omitempty"`
	Model    string `json:"model"`
	Language string `json:"language,omitempty"`
	// Translate asks for an English translation.
	Translate   bool    `json:"translate,omitempty"`
	Prompt      string  `json:"prompt,omitempty"`
	Temperature float64 `json:"temperature,omitempty"`
	// Format is the response format of the result (transcript formats).
	Format    string             `json:"format,omitempty"`
	Priority  placement.Priority `json:"priority"`
	KeepAlive time.Duration      `json:"keep_alive,omitempty"`
	// Owner is who submitted the job (uid, pid from the socket).
	Owner placement.Holder `json:"owner"`
	VADOptions
}

// VADOptions are a job's voice activity detection choices: JSON fields of
// POST /v1/jobs, form fields of uploads and of the OpenAI endpoint. Zero
// values keep the model entry's settings; VAD false turns it off.
type VADOptions struct {
	VAD *bool `json:"vad,omitempty"`
	// VADModel is a file in [models] dir (a name, not a path).
	VADModel        string  `json:"vad_model,omitempty"`
	VADThreshold    float64 `json:"vad_threshold,omitempty"`
	VADMinSpeechMS  int     `json:"vad_min_speech_ms,omitempty"`
	VADMinSilenceMS int     `json:"vad_min_silence_ms,omitempty"`
	VADMaxSpeechS   float64 `json:"vad_max_speech_s,omitempty"`
	VADSpeechPadMS  int     `json:"vad_speech_pad_ms,omitempty"`
}

// Timing is when a job entered and left one state.
type Timing struct {
	Entered time.Time `json:"entered"`
	Left    time.Time `json:"left,omitzero"`
}

// Job is a transcription job and, once finished, its result.
type Job struct {
	ID      string           `json:"id"`
	Spec    Spec             `json:"spec"`
	State   State            `json:"state"`
	Created time.Time        `json:"created"`
	Timings map[State]Timing `json:"timings"`
	// History lists every state change in order (retries repeat states).
	History  []StateChange `json:"history"`
	Progress float64       `json:"progress"`
	Attempts int           `json:"attempts"`
	// Placement of the current or last attempt.
	Backend     string `json:"backend,omitempty"`
	GPUIndex    int    `json:"gpu_index"`
	GPUUUID     string `json:"gpu_uuid,omitempty"`
	LeaseID     string `json:"lease_id,omitempty"`
	MemoryBytes int64  `json:"memory_bytes,omitempty"`
	// OOMFactor scales the next attempt's memory after a CUDA OOM.
	OOMFactor float64 `json:"oom_factor,omitempty"`
	// RetryBytes is the least the next attempt asks for after a CUDA OOM
	// (the executor's figure, see NeedMemory); 0 when none was given.
	RetryBytes int64  `json:"retry_bytes,omitempty"`
	Error      string `json:"error,omitempty"`
	// ErrorKind classifies Error: bad_input, timeout, backend, cancelled.
	ErrorKind string `json:"error_kind,omitempty"`
	// Result is set when completed.
	Result   *transcript.Transcript `json:"result,omitempty"`
	Finished time.Time              `json:"finished,omitzero"`

	// AudioSeconds is the audio's duration, read at admission (WAV header
	// or ffprobe); 0 when unknown. ExpectedSeconds is the expected
	// processing time (AudioSeconds × the learned real-time factor);
	// ExpectedStart, for a queued job, when it is expected to start
	// (length-aware order, order.go).
	AudioSeconds    float64   `json:"audio_seconds,omitempty"`
	ExpectedSeconds float64   `json:"expected_seconds,omitempty"`
	ExpectedStart   time.Time `json:"expected_start,omitzero"`

	// Chunks is set while and after a long job runs as chunks ([jobs]
	// chunk_over, chunks.go).
	Chunks *Chunks `json:"chunks,omitempty"`
}

// clone copies a job so callers can keep it.
func (j *Job) clone() Job {
	c := *j
	c.Timings = make(map[State]Timing, len(j.Timings))
	for k, v := range j.Timings {
		c.Timings[k] = v
	}
	c.History = append([]StateChange(nil), j.History...)
	if j.Chunks != nil {
		ch := *j.Chunks
		c.Chunks = &ch
	}
	if j.Result != nil {
		r := *j.Result
		r.Segments = append([]transcript.Segment(nil), j.Result.Segments...)
		c.Result = &r
	}
	return c
}

// StateChange is one entry of a job's history.
type StateChange struct {
	State   State     `json:"state"`
	Time    time.Time `json:"time"`
	Attempt int       `json:"attempt"`
}

// EventType names a job event.
type EventType string

// Job events on a job's stream.
const (
	EventState    EventType = "state"
	EventProgress EventType = "progress"
	EventSegment  EventType = "segment"
)

// Attempt outcomes (Event.Outcome).
const (
	OutcomeCompleted  = "completed"
	OutcomeFailed     = "failed"
	OutcomeCancelled  = "cancelled"
	OutcomeRetried    = "retried"
	OutcomeOOMRetried = "oom_retried"
)

// Event is one change of a job: a state change (with the job), progress, or
// a segment as the backend produced it.
type Event struct {
	Type EventType `json:"type"`
	Time time.Time `json:"time"`
	// State is the state entered (state events).
	State    State               `json:"state,omitempty"`
	Job      Job                 `json:"job"`
	Progress float64             `json:"progress,omitempty"`
	Segment  *transcript.Segment `json:"segment,omitempty"`
	// Outcome is how the attempt that led to this state event ended:
	// completed, failed, cancelled, retried or oom_retried (empty when no
	// attempt ended).
	Outcome string `json:"outcome,omitempty"`
}

// marked is an error that also matches a sentinel without adding its text.
type marked struct {
	err  error
	mark error
}

func (m marked) Error() string   { return m.err.Error() }
func (m marked) Unwrap() []error { return []error{m.err, m.mark} }

// needMemory is an out-of-memory failure that says how much the next
// attempt needs.
type needMemory struct {
	err   error
	bytes int64
}

func (n needMemory) Error() string   { return n.err.Error() }
func (n needMemory) Unwrap() []error { return []error{n.err, ErrOutOfMemory} }

// NeedMemory marks err as a CUDA OOM (errors.Is ErrOutOfMemory) after which
// the job's next attempt asks for at least bytes (Job.RetryBytes).
func NeedMemory(err error, bytes int64) error {
	if err == nil {
		return nil
	}
	return needMemory{err: err, bytes: bytes}
}

// neededBytes is what NeedMemory put on err, or 0.
func neededBytes(err error) int64 {
	var n needMemory
	if errors.As(err, &n) {
		return n.bytes
	}
	return 0
}

// Mark makes err match sentinel (ErrBadInput, ErrRetryable, ErrOutOfMemory)
// under errors.Is, keeping err's own message.
func Mark(err, sentinel error) error {
	if err == nil {
		return nil
	}
	return marked{err: err, mark: sentinel}
}
