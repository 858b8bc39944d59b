package audio

import (
	"bytes"
	"math"
	"testing"
)

// tone returns seconds of a sine at freq Hz sampled at rate.
func tone(rate int, freq, amp, seconds float64) []float64 {
	out := make([]float64, int(seconds*float64(rate)))
	for i := range out {
		out[i] = amp * math.Sin(2*math.Pi*freq*float64(i)/float64(rate))
	}
	return out
}

// fit least-squares fits a·sin + b·cos at freq Hz (16 kHz samples) to x and
// returns the amplitude and the RMS of what is left over.
func fit(x []float32, freq float64) (amp, residual float64) {
	var ss, cc, sc, xs, xc float64
	for i, v := range x {
		w := 2 * math.Pi * freq * float64(i) / SampleRate
		s, c := math.Sin(w), math.Cos(w)
		ss, cc, sc = ss+s*s, cc+c*c, sc+s*c
		xs, xc = xs+float64(v)*s, xc+float64(v)*c
	}
	det := ss*cc - sc*sc
	a, b := (xs*cc-xc*sc)/det, (xc*ss-xs*sc)/det
	var sum float64
	for i, v := range x {
		w := 2 * math.Pi * freq * float64(i) / SampleRate
		d := float64(v) - a*math.Sin(w) - b*math.Cos(w)
		sum += d * d
	}
	return math.Hypot(a, b), math.Sqrt(sum / float64(len(x)))
}

// rms is the root mean square of x.
func rms(x []float32) float64 {
	var sum float64
	for _, v := range x {
		sum += float64(v) * float64(v)
	}
	return math.Sqrt(sum / float64(len(x)))
}

// zeroCrossings counts sign changes.
func zeroCrossingsOf(x []float32) int {
	n := 0
	for i := 1; i < len(x); i++ {
		if (x[i-1] < 0) != (x[i] < 0) {
			n++
		}
	}
	return n
}

// TestResampleTone: a 1 kHz tone written at other rates comes out of the
// decoder at 16 kHz still a 1 kHz tone of the same amplitude, with the
// expected number of samples, and (almost) nothing else in it.
func TestResampleTone(t *testing.T) {
	const freq, amp, seconds = 1000.0, 0.5, 1.0
	for _, rate := range []int{8000, 11025, 22050, 32000, 44100, 44101, 48000, 96000} {
		in := tone(rate, freq, amp, seconds)
		wav := encodeWAV(wavSpec{tag: formatFloat, bits: 32, channels: 1, rate: rate}, in)
		got, err := DecodeWAV(bytes.NewReader(wav))
		if err != nil {
			t.Fatalf("%d Hz: %v", rate, err)
		}
		want := (int64(len(in))*SampleRate + int64(rate) - 1) / int64(rate)
		if int64(len(got)) != want {
			t.Errorf("%d Hz: %d samples out of %d, want %d", rate, len(got), len(in), want)
		}
		mid := got[SampleRate/10 : len(got)-SampleRate/10] // away from the zero-padded edges
		a, res := fit(mid, freq)
		crossings := zeroCrossingsOf(mid)
		t.Logf("%6d Hz: amplitude %.5f, residual %.2e (%.1f dB), %d zero crossings in %d samples",
			rate, a, res, 20*math.Log10(res/amp), crossings, len(mid))
		if math.Abs(a-amp) > 0.005*amp {
			t.Errorf("%d Hz: amplitude %.5f, want %.3f ± 0.5%%", rate, a, amp)
		}
		if res > 1e-3*amp { // -60 dB
			t.Errorf("%d Hz: residual %.2e, want below %.1e", rate, res, 1e-3*amp)
		}
		wantCrossings := 2 * freq * float64(len(mid)) / SampleRate
		if math.Abs(float64(crossings)-wantCrossings) > 2 {
			t.Errorf("%d Hz: %d zero crossings, want %.0f ± 2", rate, crossings, wantCrossings)
		}
	}
}

// TestResampleAliasing: tones above the new Nyquist frequency (8 kHz) are
// filtered out instead of folding back into the speech band.
func TestResampleAliasing(t *testing.T) {
	const amp = 0.5
	for _, tc := range []struct {
		rate int
		freq float64
	}{{48000, 12000}, {44100, 9000}, {96000, 20000}, {22050, 10000}} {
		wav := encodeWAV(wavSpec{tag: formatFloat, bits: 32, channels: 1, rate: tc.rate}, tone(tc.rate, tc.freq, amp, 1))
		got, err := DecodeWAV(bytes.NewReader(wav))
		if err != nil {
			t.Fatal(err)
		}
		r := rms(got[SampleRate/10 : len(got)-SampleRate/10])
		t.Logf("%.0f Hz at %d Hz: output RMS %.2e (%.1f dB below the input's)", tc.freq, tc.rate, r, 20*math.Log10(amp/math.Sqrt2/r))
		if r > 1e-3*amp {
			t.Errorf("%.0f Hz at %d Hz: output RMS %.2e, want below %.1e", tc.freq, tc.rate, r, 1e-3*amp)
		}
	}
}

// TestResampleStreaming: the result does not depend on how the input is
// split into writes.
func TestResampleStreaming(t *testing.T) {
	in := make([]float32, 10007)
	for i := range in {
		in[i] = float32(math.Sin(float64(i) * 0.05))
	}
	whole := newResampler(44100, SampleRate)
	want := whole.finish(whole.write(nil, in))
	for _, chunk := range []int{1, 7, 160, 4096} {
		r := newResampler(44100, SampleRate)
		var got []float32
		for i := 0; i < len(in); i += chunk {
			got = r.write(got, in[i:min(i+chunk, len(in))])
		}
		got = r.finish(got)
		if len(got) != len(want) {
			t.Fatalf("chunk %d: %d samples, want %d", chunk, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("chunk %d: sample %d = %v, want %v", chunk, i, got[i], want[i])
			}
		}
	}
}
