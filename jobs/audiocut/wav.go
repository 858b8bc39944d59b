// Package audiocut writes the windows of a long recording as WAV files, so
// that each can run as a backend call of its own (chunked jobs, issue 26):
// 16-bit PCM WAV is cut as it is, anything else is first decoded by ffmpeg
// to 16 kHz mono; windows end either every 30 s or at pauses found from the
// samples' energy (jobs/chunk plans them).
package audiocut

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// ErrFormat says a file is not a 16-bit PCM RIFF/WAVE file.
var ErrFormat = errors.New("not 16-bit PCM WAV")

// Format is where a 16-bit PCM WAV file's samples lie and how they are laid
// out.
type Format struct {
	Rate     int // samples per second per channel
	Channels int
	// DataOffset and DataBytes locate the samples (whole frames).
	DataOffset, DataBytes int64
}

// FrameBytes is the bytes of one frame (one sample of every channel).
func (f Format) FrameBytes() int { return 2 * f.Channels }

// Frames is the number of frames in the data.
func (f Format) Frames() int64 { return f.DataBytes / int64(f.FrameBytes()) }

// maxChunks bounds the chunks skipped looking for fmt and data.
const maxChunks = 64

// maxChannels bounds the channels of a file cut as it is.
const maxChannels = 32

// ParseWAV reads the header of a 16-bit PCM WAV file of size bytes. A data
// chunk whose size is too large (a cut file) extends to the end of the file;
// one whose size is unset — 0xFFFFFFFF (ffmpeg writing to a pipe) or 0 (other
// writers that cannot seek back; by the letter an empty chunk) — extends to
// the end of the file or to the chunks that follow it there (see
// streamedData), so that a trailing LIST chunk is not read as audio.
func ParseWAV(r io.ReaderAt, size int64) (Format, error) {
	var riff [12]byte
	if _, err := r.ReadAt(riff[:], 0); err != nil {
		return Format{}, fmt.Errorf("wav header: %w: %w", ErrFormat, err)
	}
	if !bytes.Equal(riff[0:4], []byte("RIFF")) || !bytes.Equal(riff[8:12], []byte("WAVE")) {
		return Format{}, fmt.Errorf("wav header: %w: not RIFF/WAVE", ErrFormat)
	}
	var f Format
	off := int64(12)
	for range maxChunks {
		var h [8]byte
		if _, err := r.ReadAt(h[:], off); err != nil {
			return Format{}, fmt.Errorf("wav chunk at %d: %w: %w", off, ErrFormat, err)
		}
		id, n := string(h[0:4]), int64(binary.LittleEndian.Uint32(h[4:8]))
		off += 8
		switch id {
		case "fmt ":
			if err := f.readFmt(r, off, n); err != nil {
				return Format{}, err
			}
		case "data":
			if f.Rate == 0 {
				return Format{}, fmt.Errorf("wav: %w: data chunk before fmt", ErrFormat)
			}
			switch {
			case n == 0 || n == math.MaxUint32:
				n = streamedData(r, off, size)
			case n > size-off:
				n = max(0, size-off)
			}
			f.DataOffset, f.DataBytes = off, n-n%int64(f.FrameBytes())
			return f, nil
		}
		off += n + n%2
	}
	return Format{}, fmt.Errorf("wav: %w: no data chunk in the first %d chunks", ErrFormat, maxChunks)
}

// maxTail bounds the end of a file searched for chunks after a data chunk
// of unset size.
const maxTail = 1 << 20

// tailChunks are the chunk IDs that may follow a file's samples (metadata,
// cue points, padding).
var tailChunks = map[string]bool{
	"LIST": true, "id3 ": true, "ID3 ": true, "bext": true, "cue ": true, "smpl": true, "inst": true,
	"acid": true, "iXML": true, "axml": true, "JUNK": true, "PAD ": true, "_PMX": true, "fact": true,
}

// streamedData is the length of a data chunk of unset size that starts at
// off: up to the first even offset in the file's last maxTail bytes from
// which a run of well-formed tailChunks ends exactly at the end of the file
// (0 when they start right after the data header: an empty data chunk),
// else up to the end of the file.
func streamedData(r io.ReaderAt, off, size int64) int64 {
	lo := max(off, size-maxTail)
	if size-lo < 8 {
		return max(0, size-off)
	}
	tail := make([]byte, size-lo)
	if _, err := r.ReadAt(tail, lo); err != nil {
		return max(0, size-off)
	}
	for p := lo + lo%2; p+8 <= size; p += 2 {
		if chunksToEnd(tail[p-lo:]) {
			return p - off
		}
	}
	return size - off
}

// chunksToEnd reports whether b is a run of tailChunks that ends exactly at
// its end (the last one's pad byte may be missing).
func chunksToEnd(b []byte) bool {
	for q, i := int64(0), 0; i < maxChunks; i++ {
		left := int64(len(b)) - q
		if left == 0 {
			return i > 0
		}
		if left < 8 || !tailChunks[string(b[q:q+4])] {
			return false
		}
		n := int64(binary.LittleEndian.Uint32(b[q+4 : q+8]))
		if next := q + 8 + n; next == int64(len(b)) {
			return true
		}
		q += 8 + n + n%2
		if q > int64(len(b)) {
			return false
		}
	}
	return false
}

// readFmt reads the fmt chunk of n bytes at off: PCM (or extensible PCM),
// 16 bits, 1 to maxChannels channels.
func (f *Format) readFmt(r io.ReaderAt, off, n int64) error {
	if n < 16 || n > 1<<10 {
		return fmt.Errorf("wav: %w: fmt chunk of %d bytes", ErrFormat, n)
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, off); err != nil {
		return fmt.Errorf("wav fmt chunk: %w: %w", ErrFormat, err)
	}
	tag := binary.LittleEndian.Uint16(b[0:2])
	if tag == 0xFFFE && n >= 26 { // WAVE_FORMAT_EXTENSIBLE: the sub-format's tag
		tag = binary.LittleEndian.Uint16(b[24:26])
	}
	ch, rate, bits := int(binary.LittleEndian.Uint16(b[2:4])), int(binary.LittleEndian.Uint32(b[4:8])), binary.LittleEndian.Uint16(b[14:16])
	switch {
	case tag != 1:
		return fmt.Errorf("wav: %w: format tag %#x", ErrFormat, tag)
	case bits != 16:
		return fmt.Errorf("wav: %w: %d bits per sample", ErrFormat, bits)
	case ch < 1 || ch > maxChannels:
		return fmt.Errorf("wav: %w: %d channels", ErrFormat, ch)
	case rate < 1000 || rate > 384000:
		return fmt.Errorf("wav: %w: %d samples per second", ErrFormat, rate)
	}
	f.Rate, f.Channels = rate, ch
	return nil
}

// header is a canonical 44-byte header for dataBytes of samples in format f.
func header(f Format, dataBytes int64) []byte {
	b := make([]byte, 44)
	copy(b[0:4], "RIFF")
	binary.LittleEndian.PutUint32(b[4:8], uint32(36+dataBytes))
	copy(b[8:16], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:20], 16)
	binary.LittleEndian.PutUint16(b[20:22], 1)
	binary.LittleEndian.PutUint16(b[22:24], uint16(f.Channels))
	binary.LittleEndian.PutUint32(b[24:28], uint32(f.Rate))
	binary.LittleEndian.PutUint32(b[28:32], uint32(f.Rate*f.FrameBytes()))
	binary.LittleEndian.PutUint16(b[32:34], uint16(f.FrameBytes()))
	binary.LittleEndian.PutUint16(b[34:36], 16)
	copy(b[36:40], "data")
	binary.LittleEndian.PutUint32(b[40:44], uint32(dataBytes))
	return b
}

// WriteWAV writes a canonical header for samples in format f followed by
// the samples (16-bit little-endian, frames interleaved).
func WriteWAV(w io.Writer, f Format, samples []int16) error {
	if _, err := w.Write(header(f, int64(2*len(samples)))); err != nil {
		return fmt.Errorf("write wav: %w", err)
	}
	if err := binary.Write(w, binary.LittleEndian, samples); err != nil {
		return fmt.Errorf("write wav: %w", err)
	}
	return nil
}
