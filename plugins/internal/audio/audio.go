// Package audio turns an audio file into what the backends take: 16 kHz mono
// float32 samples. It decodes WAV itself (PCM 8/16/24/32-bit integer, 32/64-bit
// float, WAVE_FORMAT_EXTENSIBLE, any sample rate and channel count: channels are
// averaged, other rates resampled with a windowed-sinc filter) and hands every
// other format to ffmpeg when one is available.
package audio

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// SampleRate is the rate of every decoded stream (WHISPER_SAMPLE_RATE).
const SampleRate = 16000

// Sentinel errors. ErrNotWAV and ErrUnsupported send a file to ffmpeg when
// there is one; without ffmpeg they come back wrapped in ErrNoDecoder.
var (
	ErrNotWAV      = errors.New("not a RIFF/WAVE file")
	ErrUnsupported = errors.New("WAV encoding not decoded natively")
	ErrCorrupt     = errors.New("corrupt WAV file")
	ErrNoDecoder   = errors.New("no decoder for this format: install ffmpeg to read formats other than PCM/float WAV")
	ErrFFmpeg      = errors.New("ffmpeg could not decode the file")
	// ErrTooLong means the audio decodes to more than MaxDuration.
	ErrTooLong = errors.New("audio too long")
)

// Decoder reads audio files.
type Decoder struct {
	// FFmpeg is the ffmpeg executable for formats other than PCM/float WAV;
	// "" means none.
	FFmpeg string
}

// Decode reads the file at path and returns it as 16 kHz mono samples.
func (d Decoder) Decode(ctx context.Context, path string) ([]float32, error) {
	samples, err := decodeWAVFile(path)
	if err == nil {
		return samples, nil
	}
	if !errors.Is(err, ErrNotWAV) && !errors.Is(err, ErrUnsupported) {
		return nil, err
	}
	if d.FFmpeg == "" {
		return nil, fmt.Errorf("decode %s: %w: %w", path, ErrNoDecoder, err)
	}
	return decodeFFmpeg(ctx, d.FFmpeg, path)
}

func decodeWAVFile(path string) ([]float32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("decode audio: %w", err)
	}
	defer f.Close()
	samples, err := DecodeWAV(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return samples, nil
}

// readFull is io.ReadFull that reports a short read as ErrCorrupt, or as
// what when nothing at all could be read (a clean end where one may be).
func readFull(r io.Reader, buf []byte, what error) error {
	n, err := io.ReadFull(r, buf)
	switch {
	case err == nil:
		return nil
	case n == 0 && errors.Is(err, io.EOF):
		return what
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return fmt.Errorf("%w: truncated", ErrCorrupt)
	}
	return fmt.Errorf("read wav: %w", err)
}
