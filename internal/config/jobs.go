package config

import "github.com/wsched/wsched/internal/units"

// jobTableDefaults are the [jobs] keys that bound the job table and one
// job's result, and the [limits] keys for the TCP token's jobs.
func jobTableDefaults(j *Jobs, l *Limits) {
	j.MaxJobs = 10000
	j.MaxSegments = 100000
	j.MaxResultBytes = units.Bytes(16 * units.MiB)
	l.TokenActiveJobs = 64
	l.TokenStoredJobs = 1000
}

func (j Jobs) validateTable() error {
	switch {
	case j.MaxJobs < 1:
		return bad("jobs.max_jobs", "%d is not allowed: want at least 1", j.MaxJobs)
	case j.MaxSegments < 0:
		return bad("jobs.max_segments", "%d is not allowed: want 0 (no limit) or more", j.MaxSegments)
	case j.MaxResultBytes < 0:
		return bad("jobs.max_result_bytes", "%s is not allowed: want 0 (no limit) or more", j.MaxResultBytes.Exact())
	}
	return nil
}
