package audio

import (
	"context"
	"fmt"
	"os/exec"

	"github.com/wsched/wsched/plugins"
)

// FFmpegNone as a backend's ffmpeg setting turns the ffmpeg fallback off.
const FFmpegNone = "none"

// FFmpegPath resolves a backend's ffmpeg setting: "" looks "ffmpeg" up on
// PATH (now), FFmpegNone means none, anything else is the path. "" when
// there is none.
func FFmpegPath(setting string) string {
	switch setting {
	case FFmpegNone:
		return ""
	case "":
		p, err := exec.LookPath("ffmpeg")
		if err != nil {
			return ""
		}
		return p
	}
	return setting
}

// ForBackend decodes path for a Transcribe call: what cannot be decoded, or
// decodes to nothing, is plugins.ErrBadAudio; a cancelled ctx is its error.
func ForBackend(ctx context.Context, ffmpeg, path string) ([]float32, error) {
	samples, err := Decoder{FFmpeg: ffmpeg}.Decode(ctx, path)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, fmt.Errorf("%w: %w", plugins.ErrBadAudio, err)
	case len(samples) == 0:
		return nil, fmt.Errorf("%w: no audio samples in %s", plugins.ErrBadAudio, path)
	}
	return samples, nil
}
