package sim

import (
	"math"
	"slices"
)

// percentile is the nearest-rank p-quantile of xs (0 when empty).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

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
	r.ShortP95WaitSeconds, r.ShortP50Wait = percentile(shortWait, 0.95), percentile(shortWait, 0.5)
	r.LongP95CompletionSeconds, r.LongP95Wait = percentile(longDone, 0.95), percentile(longWait, 0.95)
	if span := r.MakespanSeconds; span > 0 {
		r.StreamsPerGPUMean = s.streamSec / span / float64(s.cfg.GPUs)
		r.StrandedBytesMean = s.strandSec / span
		r.LeasedBytesMean = s.lease / span
	}
	return r
}
