package audiocut

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/wsched/wsched/jobs/chunk"
)

// Options say how to cut.
type Options struct {
	// Over is [jobs] chunk_over: audio not longer than this is not cut.
	Over time.Duration
	// Window is the windows' size (chunk.DefaultWindow when 0).
	Window time.Duration
	// Pauses ends windows at pauses (the quietest 200 ms in the last 10 s
	// of each window) instead of every Window.
	Pauses bool
}

// Piece is one window of the recording, written to Path.
type Piece struct {
	Window chunk.Window
	Path   string
}

// frame is the energy frame for finding pauses.
const frame = 20 * time.Millisecond

// ffmpegTimeout bounds decoding a file that is not 16-bit PCM WAV.
const ffmpegTimeout = 10 * time.Minute

// Cut writes the windows of the recording at src into dir (created, 0700)
// as chunk-NNNNN.wav. A recording that is one window is not written: Cut
// returns nil. A file that is not 16-bit PCM WAV is decoded by ffmpeg (from
// PATH) to 16 kHz mono first (dir/source.wav); without ffmpeg it is an
// error wrapping ErrFormat.
func Cut(ctx context.Context, src, dir string, opt Options) ([]Piece, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cut audio: %w", err)
	}
	f, format, err := open(ctx, src, dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	duration := time.Duration(float64(format.Frames()) / float64(format.Rate) * float64(time.Second))
	if duration <= 0 {
		return nil, fmt.Errorf("cut audio %s: no samples", src)
	}
	var ws []chunk.Window
	if opt.Pauses {
		energy, err := energies(f, format)
		if err != nil {
			return nil, fmt.Errorf("cut audio %s: %w", src, err)
		}
		ws, err = chunk.PlanPauses(energy, frame, duration, opt.Over, opt.Window)
		if err != nil {
			return nil, fmt.Errorf("cut audio %s: %w", src, err)
		}
	} else if ws, err = chunk.Plan(duration, opt.Over, opt.Window); err != nil {
		return nil, fmt.Errorf("cut audio %s: %w", src, err)
	}
	if len(ws) < 2 {
		return nil, nil
	}
	out := make([]Piece, 0, len(ws))
	for _, w := range ws {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cut audio %s: %w", src, err)
		}
		p := filepath.Join(dir, fmt.Sprintf("chunk-%05d.wav", w.Index))
		if err := writeWindow(f, format, w, p); err != nil {
			return nil, fmt.Errorf("cut audio %s: %w", src, err)
		}
		out = append(out, Piece{Window: w, Path: p})
	}
	return out, nil
}

// open opens src as 16-bit PCM WAV, decoding it with ffmpeg when it is not.
func open(ctx context.Context, src, dir string) (*os.File, Format, error) {
	f, format, err := openWAV(src)
	if err == nil || !errors.Is(err, ErrFormat) {
		return f, format, err
	}
	ff, lerr := exec.LookPath("ffmpeg")
	if lerr != nil {
		return nil, Format{}, fmt.Errorf("cut audio %s: %w, and no ffmpeg on PATH to decode it", src, err)
	}
	dst := filepath.Join(dir, "source.wav")
	ctx, cancel := context.WithTimeout(ctx, ffmpegTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ff, "-nostdin", "-v", "error", "-y", "-i", src, "-ac", "1", "-ar", "16000", "-c:a", "pcm_s16le", "-f", "wav", dst)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, Format{}, fmt.Errorf("cut audio %s: ffmpeg: %w: %.200s", src, err, out)
	}
	return openWAV(dst)
}

func openWAV(path string) (*os.File, Format, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Format{}, fmt.Errorf("cut audio: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, Format{}, fmt.Errorf("cut audio: %w", err)
	}
	format, err := ParseWAV(f, st.Size())
	if err != nil {
		f.Close()
		return nil, Format{}, fmt.Errorf("cut audio %s: %w", path, err)
	}
	return f, format, nil
}

// energies is the mean square (of full scale) of each frame's samples, all
// channels together.
func energies(r io.ReaderAt, f Format) ([]float64, error) {
	per := max(1, int(int64(f.Rate)*int64(frame)/int64(time.Second))) * f.Channels
	br := bufio.NewReaderSize(io.NewSectionReader(r, f.DataOffset, f.DataBytes), 1<<16)
	buf := make([]int16, per)
	out := make([]float64, 0, f.Frames()*int64(f.Channels)/int64(per)+1)
	for {
		err := binary.Read(br, binary.LittleEndian, buf)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return out, nil // a partial last frame is left out: it cannot be a window's end
		}
		if err != nil {
			return nil, fmt.Errorf("read samples: %w", err)
		}
		var sum float64
		for _, s := range buf {
			v := float64(s) / 32768
			sum += v * v
		}
		out = append(out, sum/float64(len(buf)))
	}
}

// writeWindow writes window w of the samples as a WAV file at path.
func writeWindow(r io.ReaderAt, f Format, w chunk.Window, path string) error {
	first, last := frameAt(f, w.Start), frameAt(f, w.End)
	n := (last - first) * int64(f.FrameBytes())
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write chunk: %w", err)
	}
	bw := bufio.NewWriterSize(out, 1<<16)
	_, err = bw.Write(header(f, n))
	if err == nil {
		_, err = io.Copy(bw, io.NewSectionReader(r, f.DataOffset+first*int64(f.FrameBytes()), n))
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write chunk %s: %w", path, err)
	}
	return nil
}

// frameAt is the frame at instant d, within the data.
func frameAt(f Format, d time.Duration) int64 {
	i := int64(d.Seconds()*float64(f.Rate) + 0.5)
	return min(max(i, 0), f.Frames())
}
