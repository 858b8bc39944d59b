package runner

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/plugins"
)

// TestBadAudioNamesNoSpoolPath: the layers of a bad-audio failure (decoder,
// backend, gRPC client, host) each name the spool file; the job's error is
// the reason, once, without it.
func TestBadAudioNamesNoSpoolPath(t *testing.T) {
	const p = "/var/lib/wsched/uploads/upload-1234.wav"
	layers := func(inner string) error {
		e := fmt.Errorf("whisper transcribe %s: %w: %s", p, plugins.ErrBadAudio, inner)
		e = fmt.Errorf("plugins: transcribe %s: %w", p, e)
		return fmt.Errorf("host: transcribe %s on backend whisper (lease l-1): %w", p, e)
	}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{layers("decode " + p + ": corrupt WAV file: truncated"), "bad audio: corrupt WAV file: truncated"},
		{layers("decode " + p + ": ffmpeg could not decode the file (exit status 1): " + p + ": Invalid data found when processing input"),
			"bad audio: ffmpeg could not decode the file (exit status 1): Invalid data found when processing input"},
		{layers("no audio samples in " + p), "bad audio: no audio samples in the file"},
		{fmt.Errorf("host: transcribe %s: %w", p, fmt.Errorf("fake transcribe %s: %w", p, plugins.ErrBadAudio)), "bad audio: the backend cannot decode the file"},
	} {
		got := badAudio(tt.err, p)
		if got.Error() != tt.want {
			t.Errorf("badAudio(%q)\n = %q\nwant %q", tt.err, got, tt.want)
		}
		if strings.Contains(got.Error(), p) || !errors.Is(got, jobs.ErrBadInput) {
			t.Errorf("%q: names the spool path or is not bad input", got)
		}
	}
}
