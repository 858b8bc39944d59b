package store

import "github.com/wsched/wsched/jobs"

var bucketJobs = []byte("jobs")

var _ jobs.Store = (*DB)(nil)

// PutJob stores a job and its result.
func (d *DB) PutJob(j jobs.Job) error { return Put(d.db, bucketJobs, j.ID, j) }

// DeleteJob removes a job.
func (d *DB) DeleteJob(id string) error { return Delete(d.db, bucketJobs, id) }

// Jobs returns every stored job.
func (d *DB) Jobs() ([]jobs.Job, error) { return List[jobs.Job](d.db, bucketJobs) }
