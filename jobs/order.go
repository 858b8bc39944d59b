package jobs

import (
	"cmp"
	"math"
	"strings"
	"time"

	"github.com/wsched/wsched/placement"
)

// Length-aware order. Within a priority class queued jobs start shortest
// expected processing time first, where the expected time is the audio
// duration (known at admission: AudioSeconds) times the real-time factor
// learned for the job's model, backend and GPU model (RTFTable). Audio of
// unknown duration is treated as long: it goes after every job of known
// duration. Aging bounds the reordering: a job that has waited
// MaxReorderWait is no longer passed by shorter ones — aged jobs go first,
// in arrival order — so no job waits more than MaxReorderWait beyond what
// arrival order would have given it behind the jobs that aged before it.

// Order is the ordering rule of queued jobs ([jobs] max_reorder_wait).
type Order struct {
	// MaxReorderWait is how long a job may be passed by shorter ones; 0
	// means arrival order (FIFO within a priority).
	MaxReorderWait time.Duration
}

// Queued is what ordering needs to know of a queued job.
type Queued struct {
	Priority placement.Priority
	Arrived  time.Time
	// ExpectedSeconds is the expected processing time; NaN or negative
	// means unknown (the audio's duration could not be read).
	ExpectedSeconds float64
	// Seq breaks ties between jobs that arrived at the same instant (the
	// submission order).
	Seq uint64
}

func (q Queued) known() bool { return q.ExpectedSeconds >= 0 }

// Compare orders a before b (negative) or after (positive) at time now:
// higher priority first; then aged jobs (waited ≥ MaxReorderWait) in
// arrival order; then the rest by expected time, unknown last, ties by
// arrival.
func (o Order) Compare(a, b Queued, now time.Time) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	fifo := cmp.Or(a.Arrived.Compare(b.Arrived), cmp.Compare(a.Seq, b.Seq))
	if o.MaxReorderWait <= 0 {
		return fifo
	}
	agedA, agedB := o.aged(a, now), o.aged(b, now)
	switch {
	case agedA && agedB:
		return fifo
	case agedA:
		return -1
	case agedB:
		return 1
	}
	switch ka, kb := a.known(), b.known(); {
	case ka && kb:
		return cmp.Or(cmp.Compare(a.ExpectedSeconds, b.ExpectedSeconds), fifo)
	case ka:
		return -1
	case kb:
		return 1
	}
	return fifo
}

func (o Order) aged(q Queued, now time.Time) bool {
	return now.Sub(q.Arrived) >= o.MaxReorderWait
}

// NextAging is the next instant after now at which one of qs ages (and the
// order may change without any event); zero when none will.
func (o Order) NextAging(qs []Queued, now time.Time) time.Time {
	var next time.Time
	if o.MaxReorderWait <= 0 {
		return next
	}
	for _, q := range qs {
		at := q.Arrived.Add(o.MaxReorderWait)
		if at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next
}

// RTFKey is what a real-time factor is learned for.
type RTFKey struct {
	Model   string `json:"model"`
	Backend string `json:"backend"`
	// GPUModel is NVML's name of the GPU ("" or "cpu" on the CPU).
	GPUModel string `json:"gpu_model"`
}

// DefaultRTF is the real-time factor (processing seconds per audio second)
// assumed for a model before any job of its key has completed, on a GPU and
// on the CPU. GPU: tiny is measured on the H100 (a warm instance transcribed
// jfk.wav, 11 s, in 0.07 s: ../shared/measurements/h100-whisper-cuda.md); the
// larger models are scaled from it by their encoder and decoder work
// (unmeasured). CPU: whisper.cpp's published figures on a few cores, rounded
// up (unmeasured here). Learning replaces them after the first job.
func DefaultRTF(model string, gpu bool) float64 {
	family := model
	for _, f := range []string{"large", "medium", "small", "base", "tiny", "turbo"} {
		if strings.Contains(model, f) {
			family = f
			break
		}
	}
	gpuRTF := map[string]float64{"tiny": 0.0064, "base": 0.01, "small": 0.02, "medium": 0.04, "large": 0.07, "turbo": 0.03}
	cpuRTF := map[string]float64{"tiny": 0.05, "base": 0.1, "small": 0.3, "medium": 0.8, "large": 1.6, "turbo": 0.6}
	table := cpuRTF
	if gpu {
		table = gpuRTF
	}
	if v, ok := table[family]; ok {
		return v
	}
	return table["medium"]
}

// rtfAlpha is the weight of the newest observation in the learned average.
const rtfAlpha = 0.3

// RTFTable holds the learned real-time factors. It is not safe for
// concurrent use: one goroutine owns it (the manager's loop, the simulator).
type RTFTable struct {
	learned map[RTFKey]float64
}

// NewRTFTable returns an empty table (the defaults apply).
func NewRTFTable() *RTFTable { return &RTFTable{learned: map[RTFKey]float64{}} }

// RTF is the real-time factor for k: learned, else the default.
func (t *RTFTable) RTF(k RTFKey) float64 {
	if v, ok := t.learned[k]; ok {
		return v
	}
	return DefaultRTF(k.Model, k.GPUModel != "" && k.GPUModel != "cpu")
}

// ModelRTF is the real-time factor of a model before its job is placed
// (backend and GPU not known yet): the mean of those learned for the model,
// else the default (gpu: whether the machine has GPUs).
func (t *RTFTable) ModelRTF(model string, gpu bool) float64 {
	var sum float64
	var n int
	for k, v := range t.learned {
		if k.Model == model {
			sum, n = sum+v, n+1
		}
	}
	if n == 0 {
		return DefaultRTF(model, gpu)
	}
	return sum / float64(n)
}

// Expected is the expected processing seconds of audioSeconds of audio under
// k; negative when the duration is unknown (audioSeconds ≤ 0 or not finite).
func (t *RTFTable) Expected(k RTFKey, audioSeconds float64) float64 {
	if !(audioSeconds > 0) || math.IsInf(audioSeconds, 0) {
		return -1
	}
	return audioSeconds * t.RTF(k)
}

// Observe records a completed job: audioSeconds processed in
// processingSeconds. Observations that are not finite and positive are
// ignored.
func (t *RTFTable) Observe(k RTFKey, audioSeconds, processingSeconds float64) {
	if !(audioSeconds > 0) || !(processingSeconds > 0) || math.IsInf(audioSeconds, 0) || math.IsInf(processingSeconds, 0) {
		return
	}
	rtf := processingSeconds / audioSeconds
	if old, ok := t.learned[k]; ok {
		rtf = rtfAlpha*rtf + (1-rtfAlpha)*old
	}
	t.learned[k] = rtf
}

// Learned returns a copy of the learned factors.
func (t *RTFTable) Learned() map[RTFKey]float64 {
	out := make(map[RTFKey]float64, len(t.learned))
	for k, v := range t.learned {
		out[k] = v
	}
	return out
}
