package store

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/wsched/wsched/estimator"
)

var (
	bucketPeaks    = []byte("estimator.peaks")
	bucketContexts = []byte("estimator.contexts")
)

// SamplesKept is how many observations per key the store keeps.
const SamplesKept = 100

var (
	_ estimator.Store    = (*DB)(nil)
	_ estimator.Recorder = (*DB)(nil)
)

// Peaks returns the measured peaks for an estimate key.
func (d *DB) Peaks(k estimator.Key) ([]int64, error) { return d.samples(bucketPeaks, k.String()) }

// Contexts returns the measured CUDA contexts for a GPU model.
func (d *DB) Contexts(gpu string) ([]int64, error) { return d.samples(bucketContexts, gpu) }

// RecordPeak appends a measured peak for an estimate key.
func (d *DB) RecordPeak(k estimator.Key, bytes int64) error {
	return d.appendSample(bucketPeaks, k.String(), bytes)
}

// RecordContext appends a measured CUDA context size for a GPU model.
func (d *DB) RecordContext(gpu string, bytes int64) error {
	return d.appendSample(bucketContexts, gpu, bytes)
}

func (d *DB) samples(bucket []byte, key string) ([]int64, error) {
	xs, _, err := Get[[]int64](d.db, bucket, key)
	return xs, err
}

func (d *DB) appendSample(bucket []byte, key string, v int64) error {
	if v <= 0 {
		return fmt.Errorf("record %s/%s: %d bytes is not a measurement", bucket, key, v)
	}
	return d.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		var xs []int64
		if old := b.Get([]byte(key)); old != nil {
			if err := json.Unmarshal(old, &xs); err != nil {
				return fmt.Errorf("decode %s/%s: %w", bucket, key, err)
			}
		}
		xs = append(xs, v)
		if len(xs) > SamplesKept {
			xs = xs[len(xs)-SamplesKept:]
		}
		data, err := json.Marshal(xs)
		if err != nil {
			return err
		}
		return b.Put([]byte(key), data)
	})
}
