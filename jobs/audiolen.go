package jobs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ErrUnknownDuration says an audio file's duration could not be read.
var ErrUnknownDuration = errors.New("audio duration unknown")

// AudioProbe reads an audio file's duration in seconds at admission.
type AudioProbe func(ctx context.Context, path string) (float64, error)

// ProbeAudio returns the duration of the file at path: from its header when
// it is a RIFF/WAVE file, else from ffprobe (when one is found on PATH,
// bounded by 10 s). An error wrapping ErrUnknownDuration otherwise.
func ProbeAudio(ctx context.Context, path string) (float64, error) {
	return probeAudio(ctx, path, true)
}

// LimitedProbe is ProbeAudio with at most n ffprobe processes at once: a
// file that would need one while n run gets no duration (it is ordered as
// unknown) instead of waiting, so that a burst of submissions cannot start
// a burst of processes.
func LimitedProbe(n int) AudioProbe { return limited(n, probeAudio) }

func limited(n int, probe func(ctx context.Context, path string, ffprobe bool) (float64, error)) AudioProbe {
	sem := make(chan struct{}, max(1, n))
	return func(ctx context.Context, path string) (float64, error) {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
			return probe(ctx, path, true)
		default:
			return probe(ctx, path, false)
		}
	}
}

// errBrokenWAV marks a file that starts as RIFF/WAVE but whose header does
// not give a duration.
var errBrokenWAV = errors.New("broken WAV header")

func probeAudio(ctx context.Context, path string, ffprobe bool) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("probe audio: %w: %w", ErrUnknownDuration, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("probe audio: %w: %w", ErrUnknownDuration, err)
	}
	d, err := WAVDuration(f, st.Size())
	switch {
	case err == nil:
		return d, nil
	case errors.Is(err, errBrokenWAV): // a RIFF file ffprobe would not read better
		return 0, fmt.Errorf("probe audio: %w: %w", ErrUnknownDuration, err)
	case !ffprobe:
		return 0, fmt.Errorf("probe audio: %w: not a WAV file (%v) and ffprobe busy", ErrUnknownDuration, err)
	}
	ff, lerr := exec.LookPath("ffprobe")
	if lerr != nil {
		return 0, fmt.Errorf("probe audio: %w: not a WAV file (%v) and no ffprobe on PATH", ErrUnknownDuration, err)
	}
	return ffprobeDuration(ctx, ff, path)
}

// maxWAVChunks bounds the chunks skipped looking for fmt and data.
const maxWAVChunks = 64

// WAVDuration reads a RIFF/WAVE header from r (size bytes in all) and
// returns the duration of its data chunk: data bytes / byte rate. A data
// chunk whose size is unset (0 or 0xFFFFFFFF, as streaming writers leave it)
// extends to the end of the file.
func WAVDuration(r io.Reader, size int64) (float64, error) {
	var riff [12]byte
	if _, err := io.ReadFull(r, riff[:]); err != nil {
		return 0, fmt.Errorf("wav header: %w", err)
	}
	if !bytes.Equal(riff[0:4], []byte("RIFF")) || !bytes.Equal(riff[8:12], []byte("WAVE")) {
		return 0, errors.New("wav header: not RIFF/WAVE")
	}
	d, err := wavChunks(r, size)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errBrokenWAV, err)
	}
	return d, nil
}

// wavChunks walks the chunks after the RIFF header to fmt and data.
func wavChunks(r io.Reader, size int64) (float64, error) {
	off := int64(12)
	var byteRate uint32
	for range maxWAVChunks {
		var h [8]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return 0, fmt.Errorf("wav chunk at %d: %w", off, err)
		}
		id, n := string(h[0:4]), binary.LittleEndian.Uint32(h[4:8])
		off += 8
		switch id {
		case "fmt ":
			if n < 16 || n > 1<<16 {
				return 0, fmt.Errorf("wav fmt chunk of %d bytes", n)
			}
			b := make([]byte, n)
			if _, err := io.ReadFull(r, b); err != nil {
				return 0, fmt.Errorf("wav fmt chunk: %w", err)
			}
			byteRate = binary.LittleEndian.Uint32(b[8:12])
			if byteRate == 0 {
				return 0, errors.New("wav fmt chunk: byte rate 0")
			}
			off += int64(n)
			if n%2 == 1 {
				if _, err := io.CopyN(io.Discard, r, 1); err != nil {
					return 0, fmt.Errorf("wav fmt pad: %w", err)
				}
				off++
			}
		case "data":
			if byteRate == 0 {
				return 0, errors.New("wav data chunk before fmt")
			}
			data := int64(n)
			if n == 0 || n == math.MaxUint32 || data > size-off {
				data = max(0, size-off)
			}
			return float64(data) / float64(byteRate), nil
		default:
			skip := int64(n) + int64(n%2)
			if _, err := io.CopyN(io.Discard, r, skip); err != nil {
				return 0, fmt.Errorf("wav chunk %q: %w", id, err)
			}
			off += skip
		}
	}
	return 0, fmt.Errorf("wav header: no data chunk in the first %d chunks", maxWAVChunks)
}

// ffprobeDuration asks ffprobe for the container's duration.
func ffprobeDuration(ctx context.Context, ffprobe, path string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, ffprobe, "-v", "error", "-show_entries", "format=duration",
		"-of", "default=noprint_wrappers=1:nokey=1", "--", path).Output()
	if err != nil {
		return 0, fmt.Errorf("probe audio: ffprobe: %w: %w", ErrUnknownDuration, err)
	}
	d, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil || !(d > 0) || math.IsInf(d, 0) {
		return 0, fmt.Errorf("probe audio: ffprobe said %q: %w", strings.TrimSpace(string(out)), ErrUnknownDuration)
	}
	return d, nil
}
