package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// wavSpec describes a WAV file for encodeWAV.
type wavSpec struct {
	tag        uint16 // formatPCM or formatFloat (or anything, for errors)
	extensible bool
	channels   int
	rate       int
	bits       int
}

// encodeWAV writes channel-interleaved samples in [-1, 1) as spec says.
func encodeWAV(spec wavSpec, samples []float64) []byte {
	var data bytes.Buffer
	for _, v := range samples {
		putSample(&data, spec, v)
	}
	var b bytes.Buffer
	b.WriteString("RIFF")
	le32(&b, 0) // patched below
	b.WriteString("WAVE")
	b.WriteString("JUNK") // a chunk decoders must skip (odd size: padded)
	le32(&b, 3)
	b.Write([]byte{'a', 'b', 'c', 0})
	writeFmt(&b, spec)
	b.WriteString("data")
	le32(&b, uint32(data.Len()))
	b.Write(data.Bytes())
	out := b.Bytes()
	binary.LittleEndian.PutUint32(out[4:8], uint32(len(out)-8))
	return out
}

func writeFmt(b *bytes.Buffer, spec wavSpec) {
	size, tag := 16, spec.tag
	if spec.extensible {
		size, tag = 40, formatExtensible
	}
	b.WriteString("fmt ")
	le32(b, uint32(size))
	le16(b, tag)
	le16(b, uint16(spec.channels))
	le32(b, uint32(spec.rate))
	le32(b, uint32(spec.rate*spec.channels*spec.bits/8))
	le16(b, uint16(spec.channels*spec.bits/8))
	le16(b, uint16(spec.bits))
	if spec.extensible {
		le16(b, 22)
		le16(b, uint16(spec.bits))
		le32(b, 0) // channel mask
		le16(b, spec.tag)
		b.Write(extensibleTail[:])
	}
}

func putSample(b *bytes.Buffer, spec wavSpec, v float64) {
	switch {
	case spec.tag == formatFloat && spec.bits == 64:
		le64(b, math.Float64bits(v))
	case spec.tag == formatFloat:
		le32(b, math.Float32bits(float32(v)))
	case spec.bits == 8:
		b.WriteByte(byte(int(math.Round(v*(1<<7))) + 128))
	case spec.bits == 16:
		le16(b, uint16(int16(math.Round(v*(1<<15)))))
	case spec.bits == 24:
		x := uint32(int32(math.Round(v * (1 << 23))))
		b.Write([]byte{byte(x), byte(x >> 8), byte(x >> 16)})
	default:
		le32(b, uint32(int32(math.Round(v*(1<<31)))))
	}
}

func le16(b *bytes.Buffer, v uint16) { _ = binary.Write(b, binary.LittleEndian, v) }
func le32(b *bytes.Buffer, v uint32) { _ = binary.Write(b, binary.LittleEndian, v) }
func le64(b *bytes.Buffer, v uint64) { _ = binary.Write(b, binary.LittleEndian, v) }

// ramp is a deterministic test signal in [-0.9, 0.9].
func ramp(n int, seed float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = 0.9 * math.Sin(seed*float64(i+1)*0.37)
	}
	return out
}

// TestDecodeWAVFormats decodes every supported sample format at 16 kHz,
// mono and stereo, and compares with the signal written, within the
// format's quantisation step.
func TestDecodeWAVFormats(t *testing.T) {
	tests := []struct {
		name string
		spec wavSpec
		tol  float64
	}{
		{"pcm8", wavSpec{tag: formatPCM, bits: 8}, 0.5 / (1 << 7)},
		{"pcm16", wavSpec{tag: formatPCM, bits: 16}, 0.5 / (1 << 15)},
		{"pcm24", wavSpec{tag: formatPCM, bits: 24}, 0.5 / (1 << 23)},
		{"pcm32", wavSpec{tag: formatPCM, bits: 32}, 1e-7},
		{"float32", wavSpec{tag: formatFloat, bits: 32}, 1e-7},
		{"float64", wavSpec{tag: formatFloat, bits: 64}, 1e-7},
		{"extensible pcm24", wavSpec{tag: formatPCM, bits: 24, extensible: true}, 0.5 / (1 << 23)},
		{"extensible float32", wavSpec{tag: formatFloat, bits: 32, extensible: true}, 1e-7},
	}
	for _, tt := range tests {
		for _, channels := range []int{1, 2, 6} {
			spec := tt.spec
			spec.rate, spec.channels = SampleRate, channels
			const frames = 1000
			chans := make([][]float64, channels)
			for c := range chans {
				chans[c] = ramp(frames, float64(c+1))
			}
			got, err := DecodeWAV(bytes.NewReader(encodeWAV(spec, interleave(chans))))
			if err != nil {
				t.Fatalf("%s, %d channels: %v", tt.name, channels, err)
			}
			if len(got) != frames {
				t.Fatalf("%s, %d channels: %d samples, want %d", tt.name, channels, len(got), frames)
			}
			for i, v := range got {
				var want float64
				for c := range chans {
					want += chans[c][i]
				}
				want /= float64(channels)
				if math.Abs(float64(v)-want) > tt.tol+1e-7 {
					t.Fatalf("%s, %d channels: sample %d = %v, want %v ± %g", tt.name, channels, i, v, want, tt.tol)
				}
			}
		}
	}
}

func interleave(chans [][]float64) []float64 {
	var out []float64
	for i := range chans[0] {
		for c := range chans {
			out = append(out, chans[c][i])
		}
	}
	return out
}

// TestDecodeWAVErrors checks what corrupt or foreign input returns.
func TestDecodeWAVErrors(t *testing.T) {
	good := encodeWAV(wavSpec{tag: formatPCM, bits: 16, channels: 1, rate: SampleRate}, ramp(100, 1))
	dataAt := bytes.Index(good, []byte("data"))
	fmtAt := bytes.Index(good, []byte("fmt "))
	patch := func(off int, b ...byte) []byte {
		out := bytes.Clone(good)
		copy(out[off:], b)
		return out
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrNotWAV},
		{"short", []byte("RIFF"), ErrNotWAV},
		{"mp3", []byte("ID3\x04\x00\x00\x00\x00\x00\x00 and more bytes"), ErrNotWAV},
		{"RIFF but not WAVE", patch(8, 'A', 'V', 'I', ' '), ErrNotWAV},
		{"no data chunk", good[:dataAt], ErrCorrupt},
		{"no fmt chunk", append(bytes.Clone(good[:fmtAt]), good[dataAt:]...), ErrCorrupt},
		{"fmt chunk truncated", good[:fmtAt+20], ErrCorrupt},
		{"fmt chunk too small", patch(fmtAt+4, 8, 0, 0, 0), ErrCorrupt},
		{"zero channels", patch(fmtAt+10, 0, 0), ErrCorrupt},
		{"zero rate", patch(fmtAt+12, 0, 0, 0, 0), ErrCorrupt},
		{"block align wrong", patch(fmtAt+20, 3, 0), ErrCorrupt},
		{"skipped chunk runs past the end", patch(12+4, 0xff, 0xff, 0, 0), ErrCorrupt},
		{"mu-law", patch(fmtAt+8, 7, 0), ErrUnsupported},
		{"12-bit PCM", patch(fmtAt+22, 12, 0), ErrUnsupported},
		{"16-bit float", patch(fmtAt+8, 3, 0), ErrUnsupported},
		{"extensible, unknown subformat", extensibleWithGUID(), ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeWAV(bytes.NewReader(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeWAV = %d samples, %v; want %v", len(got), err, tt.want)
			}
		})
	}
}

func extensibleWithGUID() []byte {
	b := encodeWAV(wavSpec{tag: formatPCM, bits: 16, channels: 1, rate: SampleRate, extensible: true}, ramp(10, 1))
	i := bytes.Index(b, extensibleTail[:])
	b[i+13] ^= 0xff
	return b
}

// TestDecodeWAVLenient: a data chunk cut short, or sized 0xFFFFFFFF by a
// streaming writer, is read to the end of the file in whole frames.
func TestDecodeWAVLenient(t *testing.T) {
	spec := wavSpec{tag: formatPCM, bits: 16, channels: 2, rate: SampleRate}
	good := encodeWAV(spec, ramp(200, 1)) // 100 frames of 4 bytes
	sizeAt := bytes.Index(good, []byte("data")) + 4
	streamed := bytes.Clone(good)
	binary.LittleEndian.PutUint32(streamed[sizeAt:], unknownSize)
	tests := []struct {
		name string
		in   []byte
		want int
	}{
		{"streamed size", streamed, 100},
		{"truncated mid-frame", good[:len(good)-3], 99},
		{"trailing chunk after data", append(bytes.Clone(good), "JUNK\x02\x00\x00\x00ab"...), 100},
	}
	for _, tt := range tests {
		got, err := DecodeWAV(bytes.NewReader(tt.in))
		if err != nil || len(got) != tt.want {
			t.Errorf("%s: %d samples, %v; want %d", tt.name, len(got), err, tt.want)
		}
	}
}

// FuzzDecodeWAV: any input decodes to finite samples or fails with one of
// the package's errors; nothing panics.
func FuzzDecodeWAV(f *testing.F) {
	f.Add(encodeWAV(wavSpec{tag: formatPCM, bits: 16, channels: 1, rate: SampleRate}, ramp(32, 1)))
	f.Add(encodeWAV(wavSpec{tag: formatPCM, bits: 8, channels: 2, rate: 8000}, ramp(64, 1)))
	f.Add(encodeWAV(wavSpec{tag: formatPCM, bits: 24, channels: 3, rate: 44100, extensible: true}, ramp(90, 1)))
	f.Add(encodeWAV(wavSpec{tag: formatFloat, bits: 64, channels: 1, rate: 48000}, ramp(48, 1)))
	f.Add([]byte("RIFF\x00\x00\x00\x00WAVE"))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := DecodeWAV(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrNotWAV) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		for i, v := range got {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("sample %d = %v", i, v)
			}
		}
	})
}

// TestLowRateRefused: a 1 Hz header would turn each byte into 16 000
// samples; rates below 4 kHz are refused.
func TestLowRateRefused(t *testing.T) {
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(uint32(36 + 1000))
	b.WriteString("WAVEfmt ")
	w(uint32(16))
	w(uint16(1))
	w(uint16(1))
	w(uint32(1))
	w(uint32(1))
	w(uint16(1))
	w(uint16(8))
	b.WriteString("data")
	w(uint32(1000))
	b.Write(bytes.Repeat([]byte{0x80}, 1000))
	if _, err := DecodeWAV(bytes.NewReader(b.Bytes())); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "sample rate 1 Hz") {
		t.Errorf("1 Hz WAV: %v", err)
	}
}
