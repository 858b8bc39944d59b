// Package store persists the daemon's state in one bbolt file under
// [daemon] state_dir: leases (so a restart restores them and never grants the
// same bytes twice), and the buckets later parts of the daemon add.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/wsched/wsched/placement"
)

// ErrLocked means another process (a running daemon) holds the database.
var ErrLocked = errors.New("state database is in use by another wsched daemon")

// FileName is the database file inside the state directory.
const FileName = "wsched.db"

var bucketLeases = []byte("leases")

// DB is the daemon's database.
type DB struct {
	db *bolt.DB
}

var _ placement.Store = (*DB)(nil)

// Open opens (creating if needed) the database in dir.
func Open(dir string) (*DB, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketLeases)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init %s: %w", path, err)
	}
	return &DB{db: db}, nil
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// Bolt exposes the underlying database for packages that keep their own
// buckets in it.
func (d *DB) Bolt() *bolt.DB { return d.db }

// PutLease stores a lease (implements placement.Store).
func (d *DB) PutLease(l placement.Lease) error { return Put(d.db, bucketLeases, l.ID, l) }

// DeleteLease removes a lease (implements placement.Store).
func (d *DB) DeleteLease(id string) error { return Delete(d.db, bucketLeases, id) }

// Leases returns every stored lease.
func (d *DB) Leases() ([]placement.Lease, error) { return List[placement.Lease](d.db, bucketLeases) }

// Put stores v as JSON under key in bucket (created if needed), durably.
func Put(db *bolt.DB, bucket []byte, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s/%s: %w", bucket, key, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		return b.Put([]byte(key), data)
	})
	if err != nil {
		return fmt.Errorf("store %s/%s: %w", bucket, key, err)
	}
	return nil
}

// Delete removes key from bucket; a missing key is not an error.
func Delete(db *bolt.DB, bucket []byte, key string) error {
	err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return b.Delete([]byte(key))
	})
	if err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	return nil
}

// List decodes every value of bucket, in key order.
func List[T any](db *bolt.DB, bucket []byte) ([]T, error) {
	var out []T
	err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var t T
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("decode %s/%s: %w", bucket, k, err)
			}
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

// Get decodes one value; found is false when the key is absent.
func Get[T any](db *bolt.DB, bucket []byte, key string) (t T, found bool, err error) {
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(key))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &t)
	})
	if err != nil {
		return t, false, fmt.Errorf("get %s/%s: %w", bucket, key, err)
	}
	return t, found, nil
}

var _ placement.BatchStore = (*DB)(nil)

// Apply commits several lease changes in one transaction: one fsync for a
// whole group of grants and releases (placement's group commit).
func (d *DB) Apply(changes []placement.Change) error {
	err := d.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLeases)
		for _, c := range changes {
			switch {
			case c.Put != nil:
				data, err := json.Marshal(c.Put)
				if err != nil {
					return fmt.Errorf("encode lease %s: %w", c.Put.ID, err)
				}
				if err := b.Put([]byte(c.Put.ID), data); err != nil {
					return err
				}
			case c.Delete != "":
				if err := b.Delete([]byte(c.Delete)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit %d lease changes: %w", len(changes), err)
	}
	return nil
}
