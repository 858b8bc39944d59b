package sim

import (
	"github.com/wsched/wsched/estimator"
)

func (s *simulation) result() Result {
	work, recs := s.work, s.records
	if s.orig != nil {
		work, recs = s.orig, byJob(s.orig, s.parent, s.records)
	}
	r := Result{Policy: s.cfg.Policy, Jobs: len(work), OOM: s.oom, InstancesStarted: s.started}
	var shortWait, longWait, longDone []float64
	for i, j := range work {
		rec := recs[i]
		wait, done := rec.start-j.Arrival, rec.finish-j.Arrival
		r.MaxWaitSeconds = max(r.MaxWaitSeconds, wait)
		r.MakespanSeconds = max(r.MakespanSeconds, rec.finish)
		if j.AudioSeconds < s.cfg.ShortSeconds {
			shortWait = append(shortWait, wait)
		} else {
			longWait, longDone = append(longWait, wait), append(longDone, done)
		}
	}
	r.ShortJobs, r.LongJobs = len(shortWait), len(longDone)
	r.ShortP95WaitSeconds, r.ShortP50Wait = estimator.Percentile(shortWait, 0.95), estimator.Percentile(shortWait, 0.5)
	r.LongP95CompletionSeconds, r.LongP95Wait = estimator.Percentile(longDone, 0.95), estimator.Percentile(longWait, 0.95)
	if span := r.MakespanSeconds; span > 0 {
		r.StreamsPerGPUMean = s.streamSec / span / float64(s.cfg.GPUs)
		r.StrandedBytesMean = s.strandSec / span
		r.LeasedBytesMean = s.lease / span
	}
	return r
}
