package audiocut

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// tone is secs seconds of 16 kHz audio, channels interleaved: a 440 Hz tone
// except in the silent spans (seconds).
func tone(secs float64, channels int, silent ...[2]float64) []int16 {
	n := int(secs * 16000)
	out := make([]int16, 0, n*channels)
	for i := range n {
		at := float64(i) / 16000
		v := int16(8000 * math.Sin(2*math.Pi*440*at))
		for _, s := range silent {
			if at >= s[0] && at < s[1] {
				v = 0
			}
		}
		for range channels {
			out = append(out, v)
		}
	}
	return out
}

func writeFile(t *testing.T, path string, f Format, samples []int16) {
	t.Helper()
	var b bytes.Buffer
	if err := WriteWAV(&b, f, samples); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func pieceLens(t *testing.T, ps []Piece) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, p := range ps {
		f, err := os.Open(p.Path)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		format, err := ParseWAV(f, st.Size())
		f.Close()
		if err != nil {
			t.Fatalf("chunk %s: %v", p.Path, err)
		}
		out = append(out, time.Duration(format.Frames())*time.Second/time.Duration(format.Rate))
	}
	return out
}

// TestCutFixedWindows: without pauses a 70 s stereo file is cut into 30 s
// windows (the 10 s rest is its own window), each a WAV of the same format
// with the right number of frames.
func TestCutFixedWindows(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "in.wav")
	writeFile(t, src, Format{Rate: 16000, Channels: 2}, tone(70, 2))
	ps, err := Cut(context.Background(), src, filepath.Join(dir, "out"), Options{Over: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	lens := pieceLens(t, ps)
	if len(ps) != 3 || lens[0] != 30*time.Second || lens[1] != 30*time.Second || lens[2] != 10*time.Second || ps[2].Window.End != 70*time.Second {
		t.Errorf("pieces %+v, lengths %v", ps, lens)
	}
	if ps, err := Cut(context.Background(), src, filepath.Join(dir, "out2"), Options{Over: 2 * time.Minute}); err != nil || ps != nil {
		t.Errorf("70 s under chunk_over 2m: %v, %v; want no pieces", ps, err)
	}
}

// TestCutAtPauses: with pauses each window ends in the silence before its
// 30 s mark, never later.
func TestCutAtPauses(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "in.wav")
	writeFile(t, src, Format{Rate: 16000, Channels: 1}, tone(80, 1, [2]float64{24, 24.6}, [2]float64{47, 47.6}))
	ps, err := Cut(context.Background(), src, filepath.Join(dir, "out"), Options{Over: time.Minute, Pauses: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 {
		t.Fatalf("pieces %+v", ps)
	}
	for i, span := range [][2]float64{{24, 24.6}, {47, 47.6}} {
		end := ps[i].Window.End.Seconds()
		if end < span[0] || end > span[1] {
			t.Errorf("window %d ends at %.2f s, want in the pause %v", i, end, span)
		}
	}
	if ps[2].Window.End != 80*time.Second {
		t.Errorf("last window %+v", ps[2].Window)
	}
}

// TestCutDecodesOtherFormats: a file that is not 16-bit PCM (here 32-bit
// float, written by ffmpeg) is decoded to 16 kHz mono first.
func TestCutDecodesOtherFormats(t *testing.T) {
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("no ffmpeg")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "in.wav")
	writeFile(t, src, Format{Rate: 16000, Channels: 1}, tone(65, 1))
	flt := filepath.Join(dir, "float.wav")
	if out, err := exec.Command(ff, "-nostdin", "-v", "error", "-i", src, "-ar", "22050", "-c:a", "pcm_f32le", flt).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v %s", err, out)
	}
	ps, err := Cut(context.Background(), flt, filepath.Join(dir, "out"), Options{Over: time.Minute})
	if err != nil || len(ps) != 2 {
		t.Fatalf("pieces %+v (%v)", ps, err)
	}
	if lens := pieceLens(t, ps); lens[0] != 30*time.Second {
		t.Errorf("lengths %v", lens)
	}
}

// TestParseWAVRejects: non-PCM, 8-bit and broken headers are ErrFormat.
func TestParseWAVRejects(t *testing.T) {
	var good bytes.Buffer
	_ = WriteWAV(&good, Format{Rate: 16000, Channels: 1}, make([]int16, 10))
	for name, mutate := range map[string]func([]byte){
		"not riff": func(b []byte) { copy(b, "RIFX") },
		"float":    func(b []byte) { b[20] = 3 },
		"8 bit":    func(b []byte) { b[34] = 8 },
		"no chans": func(b []byte) { b[22] = 0 },
	} {
		b := bytes.Clone(good.Bytes())
		mutate(b)
		if _, err := ParseWAV(bytes.NewReader(b), int64(len(b))); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	f, err := ParseWAV(bytes.NewReader(good.Bytes()), int64(good.Len()))
	if err != nil || f.Frames() != 10 || f.DataOffset != 44 {
		t.Errorf("good file: %+v %v", f, err)
	}
}

// FuzzParseWAV: any bytes parse or fail without panicking, and a parsed
// format's data lies within the file in whole frames.
func FuzzParseWAV(f *testing.F) {
	var good bytes.Buffer
	_ = WriteWAV(&good, Format{Rate: 16000, Channels: 2}, make([]int16, 64))
	f.Add(good.Bytes())
	f.Add([]byte("RIFF\x00\x00\x00\x00WAVEdata\xff\xff\xff\xff"))
	f.Add(streamedWAV(64, 0, listChunk))
	f.Fuzz(func(t *testing.T, data []byte) {
		format, err := ParseWAV(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if format.DataOffset+format.DataBytes > int64(len(data)) || format.DataBytes%int64(format.FrameBytes()) != 0 || format.Rate <= 0 {
			t.Errorf("format %+v of a %d-byte file", format, len(data))
		}
	})
}

// streamedWAV is a mono 16 kHz file of samples whose data size field is
// dataSize, followed by trail.
func streamedWAV(samples int, dataSize uint32, trail []byte) []byte {
	var b bytes.Buffer
	pcm := make([]int16, samples)
	for i := range pcm {
		pcm[i] = int16(1000 + i%500) // not silence, no chunk IDs
	}
	_ = WriteWAV(&b, Format{Rate: 16000, Channels: 1}, pcm)
	out := b.Bytes()
	binary.LittleEndian.PutUint32(out[40:44], dataSize)
	return append(out, trail...)
}

// listChunk is the LIST/INFO chunk ffmpeg writes (ISFT "Lavf60.16.100").
var listChunk = []byte("LIST\x1a\x00\x00\x00INFOISFT\x0e\x00\x00\x00Lavf60.16.100\x00")

// TestParseWAVUnsetDataSize: a data chunk whose size is unset (0 or
// 0xFFFFFFFF: a streamed writer) extends to the end of the file, or to a
// trailing LIST chunk, which is not read as audio; a 0-size data chunk
// followed by a LIST chunk is empty.
func TestParseWAVUnsetDataSize(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    []byte
		samples int64
	}{
		{"0xFFFFFFFF to the end", streamedWAV(1000, math.MaxUint32, nil), 1000},
		{"0 to the end", streamedWAV(1000, 0, nil), 1000},
		{"0xFFFFFFFF then LIST", streamedWAV(1000, math.MaxUint32, listChunk), 1000},
		{"0 then LIST", streamedWAV(1000, 0, listChunk), 1000},
		{"0 then LIST and JUNK", streamedWAV(1000, 0, append(bytes.Clone(listChunk), "JUNK\x03\x00\x00\x00abc"...)), 1000},
		{"empty data then LIST", streamedWAV(0, 0, listChunk), 0},
		{"LIST without its pad byte", streamedWAV(1000, 0, []byte("LIST\x05\x00\x00\x00INFOx")), 1000},
		{"set size then LIST", streamedWAV(1000, 2000, listChunk), 1000},
	} {
		f, err := ParseWAV(bytes.NewReader(tc.data), int64(len(tc.data)))
		if err != nil || f.Frames() != tc.samples || f.DataOffset != 44 {
			t.Errorf("%s: %+v (%v); want %d frames at 44", tc.name, f, err, tc.samples)
		}
	}
}
