package api

import (
	"time"

	"github.com/wsched/wsched/jobs/transcript"
)

// AudioFDHeader on a POST /v1/jobs with a JSON body says the audio is the
// open file the client passed with the request's first bytes (SCM_RIGHTS,
// Unix socket only); its value is the file's name (the decoder looks at its
// extension). The body then has no audio_path.
const AudioFDHeader = "Wsched-Audio-Fd"

// JobRequest is the JSON body of POST /v1/jobs, or the fields of a
// multipart/form-data upload whose "file" part is the audio.
type JobRequest struct {
	// AudioPath is a file on the daemon's machine that the client may read
	// (Unix socket only): the daemon opens it with the client's credentials,
	// never under /proc, /sys or /dev.
	AudioPath   string  `json:"audio_path,omitempty"`
	Model       string  `json:"model,omitempty"`
	Language    string  `json:"language,omitempty"`
	Translate   bool    `json:"translate,omitempty"`
	Prompt      string  `json:"prompt,omitempty"`
	Temperature float64 `json:"temperature,omitempty"`
	// Format of the result: json, text, srt, vtt, verbose_json.
	Format   string `json:"format,omitempty"`
	Priority string `json:"priority,omitempty"`
	// KeepAliveSeconds keeps the loaded model warm after the job.
	KeepAliveSeconds float64 `json:"keep_alive_seconds,omitempty"`
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

// JobState is a job's place in its lifecycle.
type JobState string

// Job states.
const (
	JobPending    JobState = "pending"
	JobLoading    JobState = "loading"
	JobProcessing JobState = "processing"
	JobCompleted  JobState = "completed"
	JobFailed     JobState = "failed"
	JobCancelled  JobState = "cancelled"
)

// Finished reports whether the state is terminal.
func (s JobState) Finished() bool { return s == JobCompleted || s == JobFailed || s == JobCancelled }

// Job is a transcription job as GET /v1/jobs/{id} shows it and, once
// finished, its result.
type Job struct {
	ID      string              `json:"id"`
	Spec    JobSpec             `json:"spec"`
	State   JobState            `json:"state"`
	Created time.Time           `json:"created"`
	Timings map[JobState]Timing `json:"timings"`
	// History lists every state change in order (retries repeat states).
	History  []JobStateChange `json:"history"`
	Progress float64          `json:"progress"`
	Attempts int              `json:"attempts"`
	// Placement of the current or last attempt.
	Backend     string `json:"backend,omitempty"`
	GPUIndex    int    `json:"gpu_index"`
	GPUUUID     string `json:"gpu_uuid,omitempty"`
	LeaseID     string `json:"lease_id,omitempty"`
	MemoryBytes int64  `json:"memory_bytes,omitempty"`
	// OOMFactor scales the next attempt's memory after a CUDA OOM.
	OOMFactor float64 `json:"oom_factor,omitempty"`
	// RetryBytes is the least the next attempt asks for after a CUDA OOM.
	RetryBytes int64  `json:"retry_bytes,omitempty"`
	Error      string `json:"error,omitempty"`
	// ErrorKind classifies Error: bad_input, timeout, backend, cancelled.
	ErrorKind string                 `json:"error_kind,omitempty"`
	Result    *transcript.Transcript `json:"result,omitempty"`
	Finished  time.Time              `json:"finished,omitzero"`
	// Deleted is set in the answer of DELETE /v1/jobs/{id}: true when the
	// job had finished and was deleted, false when it was cancelled.
	Deleted bool `json:"deleted,omitempty"`

	// AudioSeconds is the audio's duration read at admission (0: unknown);
	// ExpectedSeconds the expected processing time; ExpectedStart, for a
	// job held back beyond max_active, when it is expected to start
	// (length-aware order).
	AudioSeconds    float64   `json:"audio_seconds,omitempty"`
	ExpectedSeconds float64   `json:"expected_seconds,omitempty"`
	ExpectedStart   time.Time `json:"expected_start,omitzero"`
	// Chunks is set when a long job runs as chunks ([jobs] chunk_over).
	Chunks *JobChunks `json:"chunks,omitempty"`
}

// JobChunks counts a chunked job's chunks: all, finished, placed or
// waiting for memory.
type JobChunks struct {
	Total   int `json:"total"`
	Done    int `json:"done"`
	Running int `json:"running"`
}

// JobSpec is what the job was asked to do.
type JobSpec struct {
	AudioPath   string  `json:"audio_path"`
	Uploaded    bool    `json:"uploaded,omitempty"`
	Model       string  `json:"model"`
	Language    string  `json:"language,omitempty"`
	Translate   bool    `json:"translate,omitempty"`
	Prompt      string  `json:"prompt,omitempty"`
	Temperature float64 `json:"temperature,omitempty"`
	Format      string  `json:"format,omitempty"`
	// Priority is high, normal or low.
	Priority  string        `json:"priority"`
	KeepAlive time.Duration `json:"keep_alive,omitempty"`
	Owner     Holder        `json:"owner"`
	VADOptions
}

// Timing is when a job entered and left one state.
type Timing struct {
	Entered time.Time `json:"entered"`
	Left    time.Time `json:"left,omitzero"`
}

// JobStateChange is one entry of a job's history.
type JobStateChange struct {
	State   JobState  `json:"state"`
	Time    time.Time `json:"time"`
	Attempt int       `json:"attempt"`
}

// JobEventType names an event on a job's stream.
type JobEventType string

// Job events.
const (
	JobEventState    JobEventType = "state"
	JobEventProgress JobEventType = "progress"
	JobEventSegment  JobEventType = "segment"
)

// JobEvent is one change of a job on GET /v1/jobs/{id}/events: a state
// change (with the job), progress, or a segment as the backend produced it.
type JobEvent struct {
	Type     JobEventType        `json:"type"`
	Time     time.Time           `json:"time"`
	State    JobState            `json:"state,omitempty"`
	Job      Job                 `json:"job"`
	Progress float64             `json:"progress,omitempty"`
	Segment  *transcript.Segment `json:"segment,omitempty"`
	// Outcome is how the attempt that led to this state event ended
	// (completed, failed, cancelled, retried, oom_retried); monitor stream only.
	Outcome string `json:"outcome,omitempty"`
}
