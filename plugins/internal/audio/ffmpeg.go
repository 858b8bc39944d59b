package audio

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// maxStderr is how much of ffmpeg's error output an error message keeps.
const maxStderr = 2 << 10

// formatWhitelist lists the demuxers ffmpeg may use: audio and media
// containers that hold their own data. Playlists and concatenation (hls,
// concat, dash, …) are left out: they name other files, which a client
// could point at audio it may not read.
const formatWhitelist = "wav,w64,mp3,flac,ogg,matroska,webm,mov,mp4,m4a,3gp,3g2,mj2,aac,amr,aiff,caf,au,asf,avi,mpeg,mpegts,wv,ape,tta,dts,ac3,eac3,truehd,mlp,gsm,voc,xwma,shn"

// ffmpegArgs makes ffmpeg write the first audio stream of path to stdout as
// a float32 WAV stream, channels and rate as they are: DecodeWAV then
// downmixes and resamples exactly as it does for a WAV file. "file:" and the
// protocol whitelist keep a path such as "http://…" from reaching the
// network; the format whitelist keeps playlists from reaching other files.
func ffmpegArgs(path string) []string {
	return []string{
		"-nostdin", "-hide_banner", "-loglevel", "error",
		"-protocol_whitelist", "file", "-format_whitelist", formatWhitelist,
		"-i", "file:" + path,
		"-map", "0:a:0", "-vn", "-sn", "-dn",
		"-acodec", "pcm_f32le", "-f", "wav", "-",
	}
}

// decodeFFmpeg runs ffmpeg on path and decodes its output.
func decodeFFmpeg(ctx context.Context, ffmpeg, path string) ([]float32, error) {
	cmd := exec.CommandContext(ctx, ffmpeg, ffmpegArgs(path)...)
	stderr := &tailBuffer{max: maxStderr}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("decode %s with ffmpeg: %w", path, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("decode %s with ffmpeg: %w", path, err)
	}
	samples, readErr := DecodeWAV(bufio.NewReaderSize(stdout, 1<<16))
	if readErr != nil {
		_ = cmd.Process.Kill() // it may be blocked writing to the pipe
	}
	_, _ = io.Copy(io.Discard, stdout) // anything after the data chunk
	waitErr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("decode %s with ffmpeg: %w", path, ctx.Err())
	case waitErr != nil:
		msg := strings.TrimSpace(stderr.String())
		return nil, fmt.Errorf("decode %s: %w (%v): %s", path, ErrFFmpeg, waitErr, msg)
	case readErr != nil:
		return nil, fmt.Errorf("decode %s: read ffmpeg output: %w", path, readErr)
	}
	return samples, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return t.buf.String() }
