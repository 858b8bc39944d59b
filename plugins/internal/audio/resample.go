package audio

import (
	"math"
	"time"
)

// Resampler design: band-limited interpolation with a Kaiser-windowed sinc
// (Smith, "Digital Audio Resampling"). The cutoff sits at rolloff × the
// lower Nyquist frequency, the kernel spans zeroCrossings zero crossings of
// the sinc on each side, and beta sets the window's stopband (8.6 ≈ 86 dB).
// With 24 crossings and a 0.9 rolloff, 48 kHz → 16 kHz uses 160 taps per
// output sample; the transition band (7.2 to 8 kHz) lies above whisper's
// useful range and below the new Nyquist frequency.
const (
	zeroCrossings = 24
	rolloff       = 0.9
	kaiserBeta    = 8.6
	// maxPhases bounds the kernel table: ratios whose reduced numerator is
	// larger (44101 Hz → 16000 phases) round the phase to 1/maxPhases of an
	// output sample.
	maxPhases = 1024
	// maxPrealloc bounds the capacity reserved from a header's size field,
	// which a corrupt file can set to anything.
	maxPrealloc = 1 << 20
	// maxSamples is MaxDuration at 16 kHz: decoding stops with ErrTooLong
	// beyond it (whisper.cpp holds the whole signal in memory).
	maxSamples = int(MaxDuration/time.Second) * SampleRate
)

// MaxDuration is the longest audio decoded: 4 h at 16 kHz float32 is 0.9 GB.
const MaxDuration = 4 * time.Hour

// converter collects mono samples at the source rate and produces 16 kHz.
type converter struct {
	rs  *resampler // nil when the source is already 16 kHz
	out []float32
}

func newConverter(rate int, framesHint int64) *converter {
	hint := framesHint * SampleRate / int64(rate)
	c := &converter{out: make([]float32, 0, min(max(hint, 0), maxPrealloc))}
	if rate != SampleRate {
		c.rs = newResampler(rate, SampleRate)
	}
	return c
}

func (c *converter) write(x []float32) {
	if c.rs == nil {
		c.out = append(c.out, x...)
		return
	}
	c.out = c.rs.write(c.out, x)
}

func (c *converter) finish() []float32 {
	if c.rs != nil {
		c.out = c.rs.finish(c.out)
	}
	return c.out
}

// resampler converts a stream from rate `from` to rate `to`. Output sample n
// sits at input position t = n·m/l, where l/m = to/from in lowest terms; it
// is the kernel-weighted sum of the inputs within half samples of t.
type resampler struct {
	l, m    int64
	half    int64       // kernel half-width in input samples
	phases  int64       // rows of taps
	taps    [][]float32 // taps[p][j] weighs input i0-half+1+j at phase p
	pending []float32   // input from absolute index base on
	base    int64
	nIn     int64 // inputs written so far
	n       int64 // next output index
}

func newResampler(from, to int) *resampler {
	g := gcd(int64(from), int64(to))
	r := &resampler{l: int64(to) / g, m: int64(from) / g}
	cutoff := rolloff * math.Min(1, float64(to)/float64(from)) // cycles per input sample × 2
	r.half = int64(math.Ceil(zeroCrossings / cutoff))
	r.phases = min(r.l, maxPhases)
	r.taps = make([][]float32, r.phases)
	for p := range r.phases {
		r.taps[p] = kernel(r.half, float64(p)/float64(r.phases), cutoff)
	}
	// Inputs before the start are silence.
	r.pending = make([]float32, r.half)
	r.base = -r.half
	return r
}

// kernel returns the 2·half taps for an output at fractional offset frac
// past an input sample, normalised to a DC gain of exactly 1.
func kernel(half int64, frac, cutoff float64) []float32 {
	taps := make([]float32, 2*half)
	w := make([]float64, 2*half)
	var sum float64
	for j := range w {
		tau := float64(half-1-int64(j)) + frac // distance from the input to t, in input samples
		w[j] = cutoff * sinc(cutoff*tau) * kaiser(tau/float64(half))
		sum += w[j]
	}
	for j := range w {
		taps[j] = float32(w[j] / sum)
	}
	return taps
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return math.Sin(math.Pi*x) / (math.Pi * x)
}

// kaiser is the Kaiser window on [-1, 1].
func kaiser(x float64) float64 {
	if x <= -1 || x >= 1 {
		return 0
	}
	return besselI0(kaiserBeta*math.Sqrt(1-x*x)) / besselI0(kaiserBeta)
}

// besselI0 is the modified Bessel function of the first kind, order 0, by
// its power series (converges quickly for the arguments used here).
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	for k := 1; k < 64 && term > 1e-12*sum; k++ {
		f := x / (2 * float64(k))
		term *= f * f
		sum += term
	}
	return sum
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// write adds input samples and appends every output they complete to out.
func (r *resampler) write(out, x []float32) []float32 {
	r.pending = append(r.pending, x...)
	r.nIn += int64(len(x))
	return r.drain(out, math.MaxInt64)
}

// finish flushes the tail (silence after the end) and returns out with the
// last outputs: ceil(nIn·l/m) in all.
func (r *resampler) finish(out []float32) []float32 {
	total := (r.nIn*r.l + r.m - 1) / r.m
	r.pending = append(r.pending, make([]float32, r.half+1)...)
	return r.drain(out, total)
}

// drain appends outputs while their inputs are all pending, up to limit
// outputs in all, then drops the inputs no later output needs.
func (r *resampler) drain(out []float32, limit int64) []float32 {
	end := r.base + int64(len(r.pending))
	for r.n < limit {
		i0, p := r.position(r.n)
		if i0+r.half >= end {
			break
		}
		first := i0 - r.half + 1 - r.base
		out = append(out, dot(r.taps[p], r.pending[first:first+2*r.half]))
		r.n++
	}
	i0, _ := r.position(r.n)
	if drop := i0 - r.half + 1 - r.base; drop > 0 {
		r.pending = r.pending[:copy(r.pending, r.pending[drop:])]
		r.base += drop
	}
	return out
}

// position is the input index at or before output n and the kernel phase.
func (r *resampler) position(n int64) (i0, phase int64) {
	i0, rem := n*r.m/r.l, n*r.m%r.l
	if r.phases == r.l {
		return i0, rem
	}
	phase = (rem*r.phases + r.l/2) / r.l
	if phase == r.phases {
		return i0 + 1, 0
	}
	return i0, phase
}

func dot(a, b []float32) float32 {
	var s float32
	for i, v := range a {
		s += v * b[i]
	}
	return s
}
