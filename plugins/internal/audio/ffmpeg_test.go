package audio

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/internal/testshared"
)

// lookFFmpeg returns ffmpeg's path or skips the test.
func lookFFmpeg(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg is not installed: skipping the ffmpeg path (apt-get install ffmpeg to run it)")
	}
	return p
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// convert runs ffmpeg to turn src into dst with the given output options.
func convert(t *testing.T, ffmpeg, src, dst string, opts ...string) {
	t.Helper()
	args := append([]string{"-nostdin", "-loglevel", "error", "-i", src}, opts...)
	if out, err := exec.Command(ffmpeg, append(args, dst)...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %v: %v\n%s", args, err, out)
	}
}

// TestDecodeFFmpeg: formats the WAV reader does not handle go through
// ffmpeg and come back as the same 16 kHz tone.
func TestDecodeFFmpeg(t *testing.T) {
	ffmpeg := lookFFmpeg(t)
	const rate, freq, amp = 44100, 1000.0, 0.5
	src := writeFile(t, "tone.wav", encodeWAV(wavSpec{tag: formatFloat, bits: 32, channels: 2, rate: rate},
		interleave([][]float64{tone(rate, freq, amp, 1), tone(rate, freq, amp, 1)})))
	dir := t.TempDir()
	tests := []struct {
		name string
		opts []string
		tol  float64 // relative amplitude tolerance
	}{
		{"tone.flac", nil, 0.01},
		{"tone.ogg", []string{"-acodec", "libvorbis"}, 0.05},
		{"mulaw.wav", []string{"-acodec", "pcm_mulaw", "-ar", "8000"}, 0.05},
	}
	d := Decoder{FFmpeg: ffmpeg}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := filepath.Join(dir, tt.name)
			convert(t, ffmpeg, src, dst, tt.opts...)
			got, err := d.Decode(t.Context(), dst)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(float64(len(got))-SampleRate) > SampleRate/20 {
				t.Errorf("%d samples, want about %d", len(got), SampleRate)
			}
			a, res := fit(got[SampleRate/10:len(got)-SampleRate/10], freq)
			t.Logf("amplitude %.4f, residual %.2e", a, res)
			if math.Abs(a-amp) > tt.tol*amp {
				t.Errorf("amplitude %.4f, want %.2f ± %.0f%%", a, amp, 100*tt.tol)
			}
		})
	}
}

// TestDecodeFFmpegSpeech decodes the shared jfk.mp3 through ffmpeg and
// compares it with jfk.wav, read natively.
func TestDecodeFFmpegSpeech(t *testing.T) {
	ffmpeg := lookFFmpeg(t)
	mp3, wav := sharedFile(t, "audio/jfk.mp3"), sharedFile(t, "audio/jfk.wav")
	d := Decoder{FFmpeg: ffmpeg}
	fromMP3, err := d.Decode(t.Context(), mp3)
	if err != nil {
		t.Fatal(err)
	}
	fromWAV, err := d.Decode(t.Context(), wav)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("jfk.mp3: %d samples, RMS %.4f; jfk.wav: %d samples, RMS %.4f", len(fromMP3), rms(fromMP3), len(fromWAV), rms(fromWAV))
	if diff := len(fromMP3) - len(fromWAV); diff < -SampleRate/10 || diff > SampleRate/10 {
		t.Errorf("mp3 %d samples, wav %d: more than 0.1 s apart", len(fromMP3), len(fromWAV))
	}
	if r := rms(fromMP3) / rms(fromWAV); r < 0.8 || r > 1.25 {
		t.Errorf("mp3/wav loudness ratio %.2f", r)
	}
}

// TestDecodeWithoutFFmpeg: without ffmpeg, foreign formats fail with a
// message saying what to install.
func TestDecodeWithoutFFmpeg(t *testing.T) {
	mulaw := encodeWAV(wavSpec{tag: formatPCM, bits: 16, channels: 1, rate: 8000}, ramp(10, 1))
	mulaw[bytesIndex(mulaw, "fmt ")+8] = 7
	tests := []struct {
		name  string
		data  []byte
		cause error
	}{
		{"speech.mp3", []byte("ID3\x04\x00\x00\x00\x00\x00\x00not really an mp3"), ErrNotWAV},
		{"mulaw.wav", mulaw, ErrUnsupported},
	}
	for _, tt := range tests {
		_, err := Decoder{}.Decode(t.Context(), writeFile(t, tt.name, tt.data))
		if !errors.Is(err, ErrNoDecoder) || !errors.Is(err, tt.cause) || !strings.Contains(err.Error(), "install ffmpeg") {
			t.Errorf("%s: error %v, want ErrNoDecoder wrapping %v", tt.name, err, tt.cause)
		}
	}
	if _, err := (Decoder{}).Decode(t.Context(), filepath.Join(t.TempDir(), "missing.wav")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
}

func bytesIndex(b []byte, s string) int { return strings.Index(string(b), s) }

// TestDecodeFFmpegFailure: ffmpeg's own message comes back in the error,
// and the arguments keep it off the network.
func TestDecodeFFmpegFailure(t *testing.T) {
	fake := writeFile(t, "ffmpeg", []byte("#!/bin/sh\necho \"cannot decode: $*\" >&2\nexit 1\n"))
	if err := os.Chmod(fake, 0o700); err != nil {
		t.Fatal(err)
	}
	in := writeFile(t, "x.mp3", []byte("garbage"))
	_, err := Decoder{FFmpeg: fake}.Decode(t.Context(), in)
	if !errors.Is(err, ErrFFmpeg) {
		t.Fatalf("error %v, want ErrFFmpeg", err)
	}
	for _, want := range []string{"cannot decode", "-protocol_whitelist file", "-i file:" + in} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := (Decoder{FFmpeg: fake}).Decode(ctx, in); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
	if ffmpeg, err := exec.LookPath("ffmpeg"); err == nil {
		if _, err := (Decoder{FFmpeg: ffmpeg}).Decode(t.Context(), in); !errors.Is(err, ErrFFmpeg) {
			t.Errorf("real ffmpeg on garbage: %v, want ErrFFmpeg", err)
		}
	}
}

func sharedFile(t testing.TB, name string) string { t.Helper(); return testshared.File(t, name) }

// TestPlaylistRefused: a playlist naming another file (one the client may
// not read) is not followed.
func TestPlaylistRefused(t *testing.T) {
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("no ffmpeg")
	}
	dir := t.TempDir()
	mp3, err := os.ReadFile(sharedFile(t, "audio/jfk.mp3"))
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret.mp3")
	if err := os.WriteFile(secret, mp3, 0o600); err != nil {
		t.Fatal(err)
	}
	pl := filepath.Join(dir, "upload.m3u8")
	_ = os.WriteFile(pl, []byte("#EXTM3U\n#EXT-X-TARGETDURATION:20\n#EXTINF:11.0,\n"+secret+"\n#EXT-X-ENDLIST\n"), 0o600)
	out, err := Decoder{FFmpeg: ff}.Decode(context.Background(), pl)
	if err == nil || len(out) > 0 {
		t.Errorf("a playlist was followed: %d samples, %v", len(out), err)
	}
	cc := filepath.Join(dir, "upload.ffconcat")
	_ = os.WriteFile(cc, []byte("ffconcat version 1.0\nfile '"+secret+"'\n"), 0o600)
	if out, err := (Decoder{FFmpeg: ff}).Decode(context.Background(), cc); err == nil || len(out) > 0 {
		t.Errorf("a concat list was followed: %d samples, %v", len(out), err)
	}
}
