package audio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// WAVE format tags (mmreg.h).
const (
	formatPCM        = 0x0001
	formatFloat      = 0x0003
	formatExtensible = 0xFFFE
)

// Limits that keep a corrupt header from asking for absurd work.
const (
	maxChannels   = 64
	maxSampleRate = 1_000_000
	// minSampleRate refuses rates so low that resampling to 16 kHz would
	// turn a few bytes into gigabytes (1 Hz: ×64 000); telephony is 8 kHz.
	minSampleRate = 4_000
	maxFmtBytes   = 1 << 10
	framesPerRead = 4096
	// unknownSize is what streaming writers put in a size field they cannot
	// fill in: the data then runs to the end of the file.
	unknownSize = 0xFFFFFFFF
)

// extensibleTail is the part of KSDATAFORMAT_SUBTYPE_PCM/IEEE_FLOAT after
// the format tag: 0000-0010-8000-00aa00389b71.
var extensibleTail = [14]byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71}

// wavFormat is a parsed "fmt " chunk.
type wavFormat struct {
	float      bool
	channels   int
	rate       int
	bits       int // container bits per sample
	blockAlign int
}

// DecodeWAV reads a RIFF/WAVE stream and returns its audio as 16 kHz mono
// float32 samples in [-1, 1]. A data chunk cut short (or of size 0xFFFFFFFF,
// as streaming writers leave it) is read to the end of the stream.
func DecodeWAV(r io.Reader) ([]float32, error) {
	var hdr [12]byte
	if err := readFull(r, hdr[:], ErrNotWAV); err != nil {
		return nil, notWAVIfShort(err)
	}
	if string(hdr[0:4]) != "RIFF" || string(hdr[8:12]) != "WAVE" {
		return nil, ErrNotWAV
	}
	var format *wavFormat
	for {
		id, size, err := chunkHeader(r)
		if err != nil {
			return nil, err
		}
		switch id {
		case "fmt ":
			if format, err = readFormat(r, size); err != nil {
				return nil, err
			}
		case "data":
			if format == nil {
				return nil, fmt.Errorf("%w: data chunk before fmt chunk", ErrCorrupt)
			}
			return decodeData(r, *format, size)
		default:
			if err := skip(r, size); err != nil {
				return nil, err
			}
		}
	}
}

// notWAVIfShort: a file shorter than a RIFF header is not a WAV file.
func notWAVIfShort(err error) error {
	if errors.Is(err, ErrCorrupt) {
		return ErrNotWAV
	}
	return err
}

func chunkHeader(r io.Reader) (string, uint32, error) {
	var h [8]byte
	if err := readFull(r, h[:], fmt.Errorf("%w: no data chunk", ErrCorrupt)); err != nil {
		return "", 0, err
	}
	return string(h[0:4]), binary.LittleEndian.Uint32(h[4:8]), nil
}

// skip discards a chunk body and its pad byte.
func skip(r io.Reader, size uint32) error {
	n := int64(size) + int64(size%2)
	if _, err := io.CopyN(io.Discard, r, n); err != nil {
		return fmt.Errorf("%w: chunk runs past the end of the file", ErrCorrupt)
	}
	return nil
}

func readFormat(r io.Reader, size uint32) (*wavFormat, error) {
	if size < 16 || size > maxFmtBytes {
		return nil, fmt.Errorf("%w: fmt chunk of %d bytes", ErrCorrupt, size)
	}
	body := make([]byte, int(size)+int(size%2))
	if err := readFull(r, body, fmt.Errorf("%w: truncated fmt chunk", ErrCorrupt)); err != nil {
		return nil, err
	}
	return parseFormat(body[:size])
}

func parseFormat(b []byte) (*wavFormat, error) {
	tag := binary.LittleEndian.Uint16(b[0:2])
	f := &wavFormat{
		channels:   int(binary.LittleEndian.Uint16(b[2:4])),
		rate:       int(binary.LittleEndian.Uint32(b[4:8])),
		blockAlign: int(binary.LittleEndian.Uint16(b[12:14])),
		bits:       int(binary.LittleEndian.Uint16(b[14:16])),
	}
	if tag == formatExtensible {
		if len(b) < 40 || binary.LittleEndian.Uint16(b[16:18]) < 22 || [14]byte(b[26:40]) != extensibleTail {
			return nil, fmt.Errorf("%w: WAVE_FORMAT_EXTENSIBLE with an unknown subformat", ErrUnsupported)
		}
		tag = binary.LittleEndian.Uint16(b[24:26])
	}
	switch tag {
	case formatPCM:
		if f.bits != 8 && f.bits != 16 && f.bits != 24 && f.bits != 32 {
			return nil, fmt.Errorf("%w: %d-bit PCM", ErrUnsupported, f.bits)
		}
	case formatFloat:
		if f.bits != 32 && f.bits != 64 {
			return nil, fmt.Errorf("%w: %d-bit float", ErrUnsupported, f.bits)
		}
		f.float = true
	default:
		return nil, fmt.Errorf("%w: format tag 0x%04x", ErrUnsupported, tag)
	}
	return f, f.validate()
}

func (f *wavFormat) validate() error {
	switch {
	case f.channels < 1 || f.channels > maxChannels:
		return fmt.Errorf("%w: %d channels", ErrCorrupt, f.channels)
	case f.rate < minSampleRate || f.rate > maxSampleRate:
		return fmt.Errorf("%w: sample rate %d Hz (want %d to %d)", ErrCorrupt, f.rate, minSampleRate, maxSampleRate)
	case f.blockAlign != f.channels*f.bits/8:
		return fmt.Errorf("%w: block align %d for %d channels of %d bits", ErrCorrupt, f.blockAlign, f.channels, f.bits)
	}
	return nil
}

// decodeData streams the data chunk through the downmix and the resampler.
func decodeData(r io.Reader, f wavFormat, size uint32) ([]float32, error) {
	if size != unknownSize {
		r = io.LimitReader(r, int64(size))
	}
	out := newConverter(f.rate, int64(size)/int64(f.blockAlign))
	buf := make([]byte, framesPerRead*f.blockAlign)
	mono := make([]float32, framesPerRead)
	for {
		n, err := io.ReadFull(r, buf)
		frames := n / f.blockAlign
		f.downmix(buf[:frames*f.blockAlign], mono[:frames])
		out.write(mono[:frames])
		if len(out.out) > maxSamples {
			return nil, fmt.Errorf("%w: more than %s of audio", ErrTooLong, MaxDuration)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return out.finish(), nil
		}
		if err != nil {
			return nil, fmt.Errorf("read wav data: %w", err)
		}
	}
}

// downmix converts whole frames to mono: the mean of the channels.
func (f wavFormat) downmix(frames []byte, mono []float32) {
	width := f.bits / 8
	scale := 1 / float32(f.channels)
	for i := range mono {
		frame := frames[i*f.blockAlign:]
		var sum float32
		for c := range f.channels {
			sum += f.sample(frame[c*width:])
		}
		mono[i] = sum * scale
	}
}

// sample converts one little-endian sample.
func (f wavFormat) sample(b []byte) float32 {
	switch {
	case f.float && f.bits == 32:
		return clampUnit(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))))
	case f.float:
		return clampUnit(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	case f.bits == 8:
		return (float32(b[0]) - 128) / 128 // 8-bit WAV is unsigned
	case f.bits == 16:
		return float32(int16(binary.LittleEndian.Uint16(b))) / (1 << 15)
	case f.bits == 24:
		v := int32(uint32(b[0])<<8|uint32(b[1])<<16|uint32(b[2])<<24) >> 8
		return float32(v) / (1 << 23)
	}
	return float32(float64(int32(binary.LittleEndian.Uint32(b))) / (1 << 31))
}

// clampUnit maps a float sample into [-1, 1] (full scale, where the integer
// formats end) and NaN to 0, so one bad sample cannot poison the whole mel
// spectrogram or overflow the resampler.
func clampUnit(v float64) float32 {
	switch {
	case v != v:
		return 0
	case v > 1:
		return 1
	case v < -1:
		return -1
	}
	return float32(v)
}
