package runner

import (
	"fmt"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/models"
	"github.com/wsched/wsched/placement"
)

// whisperBestOf is whisper.cpp's default best_of with temperature fallback,
// which the whisper backend keeps: a fallback re-allocates the KV self cache
// for best_of + 2 decoders, so leases reserve for it.
const whisperBestOf = 5

// whisperFlashAttention is how whisper.cpp models are loaded, and sized:
// flash attention shrinks the encoder's compute buffer (tiny: 64.8 → 17.7 MB
// on the CPU) and is whisper.cpp's own default.
const whisperFlashAttention = true

// Viewer gives the placement engine's published view (*placement.Engine).
type Viewer interface {
	View() placement.View
}

// Sizer estimates memory for models against the GPUs the engine sees now
// (available memory by the accounting formula, for the fit lines).
type Sizer struct {
	est *estimator.Estimator
	eng Viewer
}

// NewSizer returns a Sizer over est and the engine's view.
func NewSizer(est *estimator.Estimator, eng Viewer) *Sizer { return &Sizer{est: est, eng: eng} }

// Estimate answers req for the GPUs it names, or for every GPU when none.
func (z *Sizer) Estimate(req estimator.Request) (estimator.Result, error) {
	if len(req.GPUs) == 0 {
		req.GPUs = FreeMemory(z.eng.View())
	}
	return z.est.Estimate(req)
}

// EstimateAnyGPU estimates req for every GPU model on the machine (each
// with what it has learned for that model) and recommends the largest, since
// the placement engine has not chosen a GPU yet.
func (z *Sizer) EstimateAnyGPU(req estimator.Request) (estimator.Result, error) {
	req.GPUs = FreeMemory(z.eng.View())
	res, err := z.est.Estimate(req)
	if err != nil {
		return res, err
	}
	for _, g := range res.GPUs {
		res.RecommendedBytes = max(res.RecommendedBytes, g.RecommendedBytes)
	}
	return res, nil
}

// FreeMemory lists each GPU of a view with its available memory.
func FreeMemory(v placement.View) []estimator.GPUFree {
	out := []estimator.GPUFree{}
	for _, g := range v.GPUs {
		out = append(out, estimator.GPUFree{Index: g.Index, Name: g.Name, AvailableBytes: g.AvailableOrZero()})
	}
	return out
}

// size is the lease size for a job: the estimator's recommendation
// (learned peaks included) for the model, reserving whisper.cpp's fallback
// decoders, scaled by the job's OOM factor (1.5 per out-of-memory retry).
// Nothing is learned during the retries, so the factor applies to the same
// estimate each time: E, 1.5 E, 2.25 E, …
func (r *Runner) size(m models.Model, job jobs.Job) (int64, estimator.Key, error) {
	if m.MemoryBytes > 0 { // configured: the operator knows best
		key := estimator.Key{Backend: estimator.Backend(m.Backend), Model: m.Name}
		return int64(float64(m.MemoryBytes) * max(1, job.OOMFactor)), key, nil
	}
	req, err := m.EstimateRequest()
	if err != nil {
		return 0, estimator.Key{}, jobs.Mark(fmt.Errorf("size job: %w (set memory in the model's [[models.model]] entry)", err), jobs.ErrBadInput)
	}
	if req.Backend == estimator.WhisperCpp {
		fa := loadRequest(m).FlashAttention
		req.BestOf, req.FlashAttention = whisperBestOf, &fa
	}
	res, err := r.sizer.EstimateAnyGPU(req)
	if err != nil {
		return 0, estimator.Key{}, jobs.Mark(fmt.Errorf("size job: %w", err), jobs.ErrBadInput)
	}
	bytes := res.RecommendedBytes
	if job.OOMFactor > 1 {
		bytes = int64(float64(bytes) * job.OOMFactor)
	}
	return bytes, res.Key, nil
}

// learnRaised records, after a job needed out-of-memory retries to
// complete, the lease size that finally worked, so later estimates for the
// same key start there instead of at the size that failed.
func (r *Runner) learnRaised(key estimator.Key, bytes int64) {
	if err := r.learn.RecordPeak(key, bytes); err != nil {
		r.log.Warn("cannot record a raised estimate for learning", "err", err)
	}
}
