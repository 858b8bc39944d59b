package runner

import (
	"context"

	"github.com/wsched/wsched/jobs"
)

// VADOn reports whether the job runs with voice activity detection (the
// job's choice, else its model entry's): a chunked job is then cut at
// pauses (jobs/audiocut). False when the model cannot be found.
func (r *Runner) VADOn(ctx context.Context, job jobs.Job) bool {
	m, err := r.lookupModel(ctx, job.Spec.Model)
	return err == nil && m.Descriptor.VAD && vadOn(m, job)
}
