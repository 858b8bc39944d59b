package estimator

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/wsched/wsched/internal/units"
)

// Key identifies a kind of process whose measured peaks are comparable:
// the same backend, model (file sha256 or name), precision, number of
// decoded sequences (beam/best-of), batch (whisper.cpp: processors), GPU
// model and NVIDIA driver major version (a new driver moves the CUDA context
// and runtime buffers). The daemon records NVML's peak for a lease's holder
// under it.
type Key struct {
	Backend   Backend `json:"backend"`
	Model     string  `json:"model"`
	Precision string  `json:"precision"`
	Beam      int     `json:"beam"`
	Batch     int     `json:"batch"`
	GPUModel  string  `json:"gpu_model"`
	// Driver is the driver's major version ("550"; DriverMajor), "" when
	// unknown.
	Driver string `json:"driver,omitempty"`
	// Part is "" for a whole one-stream process and PartStream for what one
	// decoding stream of an instance serving several allocates on its own
	// (issue 26): learned apart, so each part is raised by its own peaks.
	Part string `json:"part,omitempty"`
}

// PartStream is the Key.Part of per-stream peaks.
const PartStream = "stream"

// Stream is k for the per-stream part of its estimate.
func (k Key) Stream() Key {
	k.Part = PartStream
	return k
}

// DriverMajor is the major version of an NVIDIA driver version string
// ("550.54.15" → "550"), or "" when v does not start with one.
func DriverMajor(v string) string {
	major, _, _ := strings.Cut(v, ".")
	if major == "" || strings.Trim(major, "0123456789") != "" {
		return ""
	}
	return major
}

// String is a stable, unambiguous encoding for use as a storage key.
func (k Key) String() string {
	parts := []string{string(k.Backend), k.Model, k.Precision, strconv.Itoa(k.Beam), strconv.Itoa(k.Batch), k.GPUModel}
	if k.Driver != "" || k.Part != "" { // keys learned before drivers were known keep their encoding
		parts = append(parts, k.Driver)
	}
	if k.Part != "" {
		parts = append(parts, k.Part)
	}
	for i, p := range parts {
		parts[i] = strconv.Quote(p)
	}
	return strings.Join(parts, "|")
}

// ContextKey is what a measured CUDA context is stored under: the GPU model
// and, when known, the driver's major version (a new driver moves the
// context): "NVIDIA H100 80GB HBM3|580".
func ContextKey(gpuModel, driver string) string {
	if d := DriverMajor(driver); d != "" {
		return gpuModel + "|" + d
	}
	return gpuModel
}

// Store is the read side of what the estimator learns from: peak bytes
// observed per Key and CUDA context bytes per ContextKey. The daemon
// implements it over its database; MemStore is the in-memory one.
type Store interface {
	Peaks(k Key) ([]int64, error)
	Contexts(gpuModel string) ([]int64, error)
}

// Recorder is the write side.
type Recorder interface {
	RecordPeak(k Key, bytes int64) error
	RecordContext(gpuModel string, bytes int64) error
}

var (
	_ Store    = (*MemStore)(nil)
	_ Recorder = (*MemStore)(nil)
)

// MemStore keeps the last Limit observations per key in memory.
type MemStore struct {
	Limit    int
	mu       sync.Mutex
	peaks    map[string][]int64
	contexts map[string][]int64
}

// NewMemStore returns an empty store keeping limit samples per key (<= 0: 100).
func NewMemStore(limit int) *MemStore {
	if limit <= 0 {
		limit = 100
	}
	return &MemStore{Limit: limit, peaks: map[string][]int64{}, contexts: map[string][]int64{}}
}

func (s *MemStore) add(m map[string][]int64, k string, v int64) error {
	if v <= 0 {
		return fmt.Errorf("record %d bytes: %w", v, ErrBadRequest)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	xs := append(m[k], v)
	if len(xs) > s.Limit {
		xs = xs[len(xs)-s.Limit:]
	}
	m[k] = xs
	return nil
}

// RecordPeak adds one observed peak for k.
func (s *MemStore) RecordPeak(k Key, b int64) error { return s.add(s.peaks, k.String(), b) }

// RecordContext adds one observed CUDA context size for a GPU model.
func (s *MemStore) RecordContext(gpu string, b int64) error { return s.add(s.contexts, gpu, b) }

// Peaks returns the observations for k.
func (s *MemStore) Peaks(k Key) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.peaks[k.String()]), nil
}

// Contexts returns the context observations for a GPU model.
func (s *MemStore) Contexts(gpu string) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.contexts[gpu]), nil
}

// Percentile is the nearest-rank p-quantile (0 < p <= 1) of xs; 0 if empty.
func Percentile[T int64 | float64](xs []T, p float64) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// applyLearnedContext swaps the configured CUDA context for the one learned
// on this GPU model and driver, when the profile has a context term (over
// the row's figure or [estimator] cuda_context). The context only grows with
// what is learned: a measured context below the configured one keeps it.
func (e *Estimator) applyLearnedContext(f *formula, gpuModel, driver string) error {
	if e.store == nil || gpuModel == "" || f.breakdown.Context == 0 {
		return nil
	}
	key := ContextKey(gpuModel, driver)
	obs, err := e.store.Contexts(key)
	if err != nil {
		return fmt.Errorf("estimate: learned context for %q: %w", gpuModel, err)
	}
	if len(obs) == 0 {
		return nil
	}
	c := Percentile(obs, e.cfg.LearnPercentile)
	if c <= f.breakdown.Context {
		f.explain = append(f.explain, fmt.Sprintf("context: learned %s for %s (p%.0f of %d samples) is not above %s, which applies",
			units.FormatBytes(c), key, e.cfg.LearnPercentile*100, len(obs), units.FormatBytes(f.breakdown.Context)))
		return nil
	}
	f.explain = append(f.explain, fmt.Sprintf("context: learned %s for %s (p%.0f of %d samples) instead of %s",
		units.FormatBytes(c), key, e.cfg.LearnPercentile*100, len(obs), units.FormatBytes(f.breakdown.Context)))
	f.breakdown.Context = c
	return nil
}

// learnedStream is the learned per-stream figure for res's key (the
// percentile of the streams' own reported peaks × (1 + learn margin)), 0
// when none has been measured. It raises only the per-stream part.
func (e *Estimator) learnedStream(res *Result) (int64, error) {
	if e.store == nil {
		return 0, nil
	}
	obs, err := e.store.Peaks(res.Key.Stream())
	if err != nil {
		return 0, fmt.Errorf("estimate: learned stream peaks for %s: %w", res.Key, err)
	}
	if len(obs) == 0 {
		return 0, nil
	}
	p := Percentile(obs, e.cfg.LearnPercentile)
	learned := ceilMul(p, 1+e.cfg.LearnMargin)
	res.Explain = append(res.Explain, fmt.Sprintf("learning: p%.0f of %d measured stream peaks is %s, × %.2f = %s per stream",
		e.cfg.LearnPercentile*100, len(obs), units.FormatBytes(p), 1+e.cfg.LearnMargin, units.FormatBytes(learned)))
	return learned, nil
}

// applyLearned raises the estimate to the learned peak when that is higher:
// total = max(formula, pXX(observed) × (1 + learn margin)).
func (e *Estimator) applyLearned(res *Result) error {
	if e.store == nil {
		return nil
	}
	obs, err := e.store.Peaks(res.Key)
	if err != nil {
		return fmt.Errorf("estimate: learned peaks for %s: %w", res.Key, err)
	}
	if len(obs) == 0 {
		res.Explain = append(res.Explain, "learning: no measured peak for this key yet; the formula applies")
		return nil
	}
	p := Percentile(obs, e.cfg.LearnPercentile)
	learned := ceilMul(p, 1+e.cfg.LearnMargin)
	why := fmt.Sprintf("learning: p%.0f of %d measured peaks is %s, × %.2f = %s; formula %s",
		e.cfg.LearnPercentile*100, len(obs), units.FormatBytes(p), 1+e.cfg.LearnMargin, units.FormatBytes(learned), units.FormatBytes(res.FormulaBytes))
	if learned <= res.FormulaBytes {
		res.Explain = append(res.Explain, why+": the formula is higher and applies")
		return nil
	}
	res.Explain = append(res.Explain, why+": the learned figure is higher and applies")
	res.Source = "learned"
	res.Breakdown.Learned = learned - res.FormulaBytes
	res.TotalBytes = learned
	res.RecommendedBytes = max(res.RecommendedBytes, learned)
	return nil
}
