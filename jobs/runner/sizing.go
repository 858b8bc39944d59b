package runner

import (
	"cmp"
	"fmt"
	"math"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/models"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/plugins"
)

// Viewer gives the placement engine's published accounts and driver
// (*placement.Engine), without its leases.
type Viewer interface {
	Accounts() ([]placement.Account, string)
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
	accts, driver := z.eng.Accounts()
	if len(req.GPUs) == 0 {
		req.GPUs = FreeMemory(accts)
	}
	req.Driver = cmp.Or(req.Driver, driver)
	return z.est.Estimate(req)
}

// EstimateAnyGPU estimates req for every GPU model on the machine (each
// with what it has learned for that model) and recommends the largest, since
// the placement engine has not chosen a GPU yet.
func (z *Sizer) EstimateAnyGPU(req estimator.Request) (estimator.Result, error) {
	accts, driver := z.eng.Accounts()
	req.GPUs, req.Driver = FreeMemory(accts), cmp.Or(req.Driver, driver)
	res, err := z.est.Estimate(req)
	if err != nil {
		return res, err
	}
	for _, g := range res.GPUs {
		res.RecommendedBytes = max(res.RecommendedBytes, g.RecommendedBytes)
	}
	return res, nil
}

// gpuName is the name of GPU index in the engine's view ("" if unknown).
func (z *Sizer) gpuName(index int) string {
	accts, _ := z.eng.Accounts()
	for _, g := range accts {
		if g.Index == index {
			return g.Name
		}
	}
	return ""
}

// FreeMemory lists each GPU with its available memory.
func FreeMemory(accts []placement.Account) []estimator.GPUFree {
	out := []estimator.GPUFree{}
	for _, g := range accts {
		out = append(out, estimator.GPUFree{Index: g.Index, Name: g.Name, AvailableBytes: g.AvailableOrZero()})
	}
	return out
}

// oomGrowth is the least a retry after a CUDA OOM grows the lease by
// ([jobs] OOM growth, jobs.Config.OOMGrowth's default).
const oomGrowth = 1.5

// retryBytes is what the attempt after a CUDA OOM on a lease of leaseBytes
// on GPU gpuIndex asks for: the most of 1.5 × the lease, the formula
// estimate (the estimator's, where the model has a profile, whatever its
// entry's memory says), and the buffers the backend reported at Load plus
// the allocation that failed (named in the error) plus the CUDA context of
// the GPU. The attempt waits in the placement queue until that much is free.
func (r *Runner) retryBytes(m models.Model, leaseBytes int64, gpuIndex int, rep plugins.MemoryReport, oom error) int64 {
	need := int64(oomGrowth * float64(leaseBytes))
	if req, err := m.EstimateRequest(); err == nil {
		if res, err := r.sizer.EstimateAnyGPU(req); err == nil {
			need = max(need, res.RecommendedBytes)
		}
	}
	if failed := plugins.FailedAllocationBytes(oom.Error()); rep.TotalBytes > 0 || failed > 0 {
		need = max(need, rep.TotalBytes+failed+estimator.OverheadFor(r.sizer.gpuName(gpuIndex)).ContextBytes)
	}
	return need
}

// outOfMemory is the failure of an attempt that ran out of memory on lease
// l: marked with what the next attempt needs, and logged as a miss.
func (r *Runner) outOfMemory(m models.Model, job jobs.Job, l placement.Lease, rep plugins.MemoryReport, err error) error {
	need := r.retryBytes(m, l.Bytes, l.GPUIndex, rep, err)
	r.log.Warn("lease too small: CUDA out of memory; the next attempt waits for more", "job", job.ID, "model", m.Name,
		"lease_bytes", l.Bytes, "reported_bytes", rep.TotalBytes, "next_bytes", need)
	if m.MemoryBytes > 0 && m.MemoryBytes <= l.Bytes {
		r.log.Warn("model entry's memory is too small: CUDA ran out of memory within it", "model", m.Name,
			"memory", m.MemoryBytes, "measured", fmt.Sprintf("out of memory in a %d-byte lease; needs at least %d", l.Bytes, need))
	}
	return jobs.NeedMemory(err, need)
}

// sizing is a job's lease: Bytes for an instance with the job as its one
// stream (the shared part and one stream), StreamBytes what the job adds to
// an instance it joins (issue 26), and the estimate key both were sized for.
type sizing struct {
	Bytes, StreamBytes int64
	Key                estimator.Key
}

// size is the lease size for a job: the estimator's recommendation
// (learned peaks included) for the model, reserving the decoders its
// backend's descriptor names (best_of), scaled by the job's OOM factor (1.5 per out-of-memory retry).
// Nothing is learned during the retries, so the factor applies to the same
// estimate each time: E, 1.5 E, 2.25 E, … — and at least the job's
// RetryBytes, what the last OOM showed it needs (retryBytes). StreamBytes
// is the estimate's per-stream part with the same margin and factor; for a
// model without a profile (configured memory, a backend's rule), the whole
// size: a stream of an unknown backend is assumed to cost an instance.
func (r *Runner) size(m models.Model, job jobs.Job) (sizing, error) {
	if m.Descriptor.CPUOnly() { // placed on the CPU: no GPU memory to size
		return sizing{}, nil
	}
	factor := max(1, job.OOMFactor)
	rule, ruled := m.RuleBytes() // the backend's own rule, from the model's size on disk
	if bytes := m.MemoryBytes; bytes > 0 || ruled {
		if bytes <= 0 {
			bytes = rule
		} // else configured: the operator knows best
		key := estimator.Key{Backend: estimator.Backend(m.Backend), Model: m.Name, Driver: estimator.DriverMajor(r.sizer.driver())}
		z := sizing{Bytes: max(int64(float64(bytes)*factor), job.RetryBytes), Key: key}
		z.StreamBytes = z.Bytes
		if req, err := m.EstimateRequest(); err == nil {
			if res, err := r.sizer.EstimateAnyGPU(req); err == nil {
				z.StreamBytes = min(z.Bytes, streamBytes(res, factor))
			}
		}
		z.StreamBytes = declaredStream(m, z, factor)
		return z, nil
	}
	req, err := m.EstimateRequest()
	if err != nil {
		return sizing{}, jobs.Mark(fmt.Errorf("size job: %w (set memory in the model's [[models.model]] entry)", err), jobs.ErrBadInput)
	}
	res, err := r.sizer.EstimateAnyGPU(req)
	if err != nil {
		return sizing{}, jobs.Mark(fmt.Errorf("size job: %w", err), jobs.ErrBadInput)
	}
	bytes := res.RecommendedBytes
	if job.OOMFactor > 1 {
		bytes = int64(float64(bytes) * job.OOMFactor)
	}
	bytes = max(bytes, job.RetryBytes)
	z := sizing{Bytes: bytes, StreamBytes: min(bytes, streamBytes(res, factor)), Key: res.Key}
	z.StreamBytes = declaredStream(m, z, factor)
	return z, nil
}

// declaredStream is z's per-stream size, or the entry's stream_memory
// (scaled by the job's OOM factor, at most the whole instance) where the
// operator declared one.
func declaredStream(m models.Model, z sizing, factor float64) int64 {
	if m.StreamMemoryBytes <= 0 {
		return z.StreamBytes
	}
	return min(z.Bytes, int64(math.Ceil(float64(m.StreamMemoryBytes)*factor)))
}

// streamBytes is what one more stream adds to an instance by estimate res:
// its per-stream part with the margin the recommendation carries, scaled by
// factor.
func streamBytes(res estimator.Result, factor float64) int64 {
	if res.Streams == nil || res.TotalBytes <= 0 {
		return 0
	}
	margin := float64(max(res.RecommendedBytes, res.TotalBytes)) / float64(res.TotalBytes)
	return int64(math.Ceil(float64(res.Streams.PerStreamBytes) * margin * factor))
}

// learnStream records the peak one stream reported on its own (Result's
// StreamMemory) under key's stream part, for the GPU it ran on: the
// estimator raises the per-stream part with it (issue 26).
func (r *Runner) learnStream(key estimator.Key, l placement.Lease, rep plugins.MemoryReport) {
	bytes := max(rep.TotalBytes, rep.Sum())
	if bytes <= 0 || l.GPU == placement.CPU || l.GPU == "" {
		return
	}
	if l.GPUName != "" {
		key.GPUModel = l.GPUName
	}
	if err := r.learn.RecordPeak(key.Stream(), bytes); err != nil {
		r.log.Warn("cannot record a stream's peak for learning", "err", err)
	}
}

// learnRaised records, after a job needed out-of-memory retries to
// complete, the lease size that finally worked, so later estimates for the
// same key start there instead of at the size that failed.
func (r *Runner) learnRaised(key estimator.Key, bytes int64) {
	if err := r.learn.RecordPeak(key, bytes); err != nil {
		r.log.Warn("cannot record a raised estimate for learning", "err", err)
	}
}

// driver is the NVIDIA driver version the engine last read.
func (z *Sizer) driver() string {
	_, d := z.eng.Accounts()
	return d
}
