// Package whisper is wsched's whisper.cpp backend: a plugins.Backend that
// loads ggml Whisper models through whisper.cpp's Go bindings (and the bit of
// cgo they lack), reports the buffer sizes whisper.cpp logs while loading,
// and transcribes audio files with streamed progress and segments, up to
// max_streams at once on one loaded model, each on a whisper_state of its
// own whose buffers it reports as the call's StreamMemory.
// cmd/wsched-backend-whisper serves it as a plugin.
//
// It links libwhisper and builds only with the build tag "whisper" and the
// cgo flags of mk/deps.mk (make plugins); without the tag the package is
// empty, so the rest of wsched builds without libwhisper.
package whisper
