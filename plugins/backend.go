// Package plugins is the SDK for wsched's transcription backends: the Backend
// interface a backend implements, Serve to run it as a go-plugin subprocess,
// and the host-side glue (Handshake, PluginSet, Dispense) that hands the
// daemon a Backend without exposing gRPC. The wire protocol lives in
// proto/wsched/backend/v1/backend.proto; its generated code in plugins/proto.
package plugins

import (
	"context"
	"time"

	"github.com/wsched/wsched/plugins/descriptor"
)

// Backend is one transcription engine running in its own process. The host
// calls Load once (or again to switch models), then Transcribe any number of
// times, possibly concurrently, then Unload. Every method must return soon
// after ctx is done.
//
// Errors should wrap one of this package's sentinel errors (ErrModelNotFound,
// ErrBadAudio, ErrOutOfMemory, …) where one applies: the sentinel survives the
// trip to the host, which decides on it (retry with a larger memory estimate
// after ErrOutOfMemory, reject the job after ErrBadAudio).
type Backend interface {
	// Info describes the backend. It must work before Load.
	Info(ctx context.Context) (Info, error)
	// Load loads a model onto a device and reports the memory it allocated.
	Load(ctx context.Context, req LoadRequest) (MemoryReport, error)
	// Transcribe decodes one audio file. It may call emit with progress and
	// segment events as it goes; when emit returns an error (the host went
	// away or cancelled) Transcribe should stop and return it.
	Transcribe(ctx context.Context, req TranscribeRequest, emit func(Event) error) (Result, error)
	// Unload frees the model; it is not an error when nothing is loaded.
	Unload(ctx context.Context) error
	// Health returns nil when the backend can serve requests.
	Health(ctx context.Context) error
}

// Info describes a backend.
type Info struct {
	Name         string            // matches the binary: wsched-backend-NAME
	Version      string            // the backend's own version
	ModelFormats []string          // e.g. "ggml", "onnx"
	Devices      []string          // device kinds: "cpu", "cuda"
	Metadata     map[string]string // free-form facts for `wsched backends`
	// PIDs are processes other than the backend's own that hold its loaded
	// model (an app it started, and the app's workers): the host counts
	// them against the instance's lease. Empty for in-process engines.
	PIDs []int
	// Descriptor is what the daemon needs to know to serve the backend's
	// models without knowing the backend (plugins/descriptor). Zero for
	// backends that predate it.
	Descriptor descriptor.Descriptor
}

// ExtraMaxStreams in a LoadRequest's Extra is the instance's max_streams
// (issue 26): how many Transcribe calls the host sends it at once, each with
// its own decoding state. The host always sets it (the model entry's
// max_streams, else the descriptor's MaxStreams); a backend that serves one
// call at a time may ignore it.
const ExtraMaxStreams = "max_streams"

// LoadRequest says which model to load where.
type LoadRequest struct {
	ModelPath string // absolute path, checked by the daemon
	// Device as the subprocess sees it: "cpu" or "cuda:N", where N counts
	// only the GPUs in CUDA_VISIBLE_DEVICES (normally "cuda:0").
	Device         string
	Threads        int    // CPU threads per transcription; 0 = backend default
	FlashAttention bool   // use flash attention where supported
	VADModelPath   string // VAD model; "" = none available
	// ModelName is the name clients know the model by, for logs and errors.
	ModelName string
	// Extra are the model's options as the backend's descriptor declares
	// them (defaults filled in), as strings.
	Extra map[string]string
}

// MemoryReport is what the backend's engine says it allocated for the loaded
// model, in bytes. Items the engine does not report are 0.
type MemoryReport struct {
	ModelBytes   int64
	KVSelfBytes  int64
	KVCrossBytes int64
	KVPadBytes   int64
	ComputeBytes map[string]int64 // scratch buffers by engine name ("encode", "decode", …)
	// TotalBytes is the backend's total, at least the sum of the items above.
	// Serve fills it with that sum when a backend leaves it 0.
	TotalBytes int64
}

// Sum adds up the itemised buffers.
func (m MemoryReport) Sum() int64 {
	sum := m.ModelBytes + m.KVSelfBytes + m.KVCrossBytes + m.KVPadBytes
	for _, b := range m.ComputeBytes {
		sum += b
	}
	return sum
}

// TranscribeRequest is one transcription. Audio travels by path: the daemon
// owns the file and the backend runs as the daemon's user.
type TranscribeRequest struct {
	AudioPath     string
	Language      string // ISO 639-1, or "" / "auto" to detect
	Translate     bool   // translate to English
	BeamSize      int    // 0 = backend default (greedy)
	BestOf        int    // 0 = backend default
	InitialPrompt string
	VAD           bool      // skip non-speech with the VAD model given at Load
	VADParams     VADParams // how VAD cuts the audio; zero fields: backend defaults
	Extra         map[string]string
}

// VADParams tune voice activity detection (whisper.cpp's
// whisper_vad_params). A zero field keeps the backend's default.
type VADParams struct {
	Threshold  float64       // speech probability above which a frame is speech, 0 to 1
	MinSpeech  time.Duration // shorter speech is dropped
	MinSilence time.Duration // silence this long ends a speech segment
	MaxSpeech  time.Duration // longer speech segments are split
	SpeechPad  time.Duration // kept before and after each speech segment
}

// IsZero reports whether every parameter is left to the backend.
func (p VADParams) IsZero() bool { return p == VADParams{} }

// Segment is a stretch of transcript with its place in the audio.
type Segment struct {
	Index      int
	Start, End time.Duration
	Text       string
}

// EventKind says which field of an Event is set.
type EventKind int

// Event kinds.
const (
	EventProgress EventKind = iota + 1
	EventSegment
)

// Event is what a backend reports while it transcribes: progress or a
// segment. Build one with ProgressEvent or SegmentEvent.
type Event struct {
	Kind    EventKind
	Percent float64 // EventProgress: 0 to 100
	Segment Segment // EventSegment
}

// ProgressEvent reports that percent (0–100) of the audio is done.
func ProgressEvent(percent float64) Event { return Event{Kind: EventProgress, Percent: percent} }

// SegmentEvent reports one finished segment.
func SegmentEvent(s Segment) Event { return Event{Kind: EventSegment, Segment: s} }

// Result is a finished transcription.
//
// A backend may emit its segments as it goes or return them here; the host
// receives each segment once either way: Serve streams any segments of
// Result.Segments beyond the number already emitted. On the host side
// Segments holds every segment in the order received.
type Result struct {
	Language string        // detected or requested, ISO 639-1
	Duration time.Duration // length of the audio
	Text     string
	Segments []Segment
	// StreamMemory is what this call's own decoding state allocated (KV
	// caches, compute buffers) in an instance serving several streams at
	// once; zero when the backend does not report it. The host learns
	// per-stream peaks from it.
	StreamMemory MemoryReport
}
