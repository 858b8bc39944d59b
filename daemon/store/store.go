// Package store persists the daemon's state in one bbolt file under
// [daemon] state_dir: leases (so a restart restores them and never grants the
// same bytes twice), and the buckets later parts of the daemon add.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wsched/wsched/placement"
)

// ErrLocked means another process (a running daemon) holds the database.
var ErrLocked = errors.New("state database is in use by another wsched daemon")

// FileName is the database file inside the state directory.
const FileName = "wsched.db"

var bucketLeases = []byte("leases")

// DB is the daemon's database. Lease changes go to the lease journal
// (wal.go) and reach bbolt at compaction.
type DB struct {
	db   *bolt.DB
	dir  string
	mu   sync.Mutex // serialises the journal
	wal  *wal
	seq  uint64 // the commit epoch (epoch.go)
	path string
	// folded is the set of lease IDs in bbolt, read at the first fold and
	// kept by each: a lease granted and released within one journal never
	// reached bbolt, and its deletion is dropped instead of looked up there
	// (with grant+release churn, most of a journal).
	folded map[string]struct{}
}

var _ placement.Store = (*DB)(nil)

// Open opens (creating if needed) the database in dir, without logging.
func Open(dir string) (*DB, error) { return OpenLogged(dir, nil) }

// OpenLogged opens (creating if needed) the database and the lease journal
// in dir and replays the journal (it is compacted into the database when it
// has grown, and at Close). A torn journal tail is truncated and logged to
// log.
func OpenLogged(dir string, log *slog.Logger) (*DB, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	path := filepath.Join(dir, FileName)
	epoch, err := readEpoch(dir)
	if err != nil {
		return nil, err
	}
	if err := checkEpoch(path, epoch); err != nil {
		return nil, err
	}
	db, err := openBolt(path, bolt.Options{Timeout: time.Second, InitialMmapSize: 64 << 20})
	if err != nil {
		return nil, err
	}
	var seq uint64
	err = guard(func() error { return initBolt(db, &seq) })
	if err == nil && seq < epoch {
		err = rolledBack(path, seq, epoch)
	}
	if err == nil && seq > epoch { // a crash between a fold and its side file
		err = writeEpoch(dir, seq)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init %s: %w", path, damaged(err))
	}
	d := &DB{db: db, dir: dir, seq: seq, path: path}
	if d.wal, err = openWAL(filepath.Join(dir, WALName), log); err != nil {
		db.Close()
		return nil, err
	}
	return d, nil
}

// initBolt reads bbolt's commit sequence and creates the leases bucket
// when missing (without a commit when it exists, so that opening does not
// add a commit bbolt could fall back to).
func initBolt(db *bolt.DB, seq *uint64) error {
	ready := false
	err := db.View(func(tx *bolt.Tx) error {
		*seq = boltSeq(tx)
		meta := tx.Bucket(bucketMeta)
		ready = tx.Bucket(bucketLeases) != nil && meta != nil && meta.Get(formatKey) != nil
		return nil
	})
	if err != nil || ready {
		return err
	}
	return db.Update(initLeases) // the buckets, and JSON leases of an earlier version rewritten once
}

// Close compacts the lease journal into the database and closes both.
func (d *DB) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.compact()
	err = errors.Join(err, d.wal.close(), d.db.Close())
	return err
}

// Bolt exposes the underlying database for packages that keep their own
// buckets in it.
func (d *DB) Bolt() *bolt.DB { return d.db }

// PutLease stores a lease (implements placement.Store).
func (d *DB) PutLease(l placement.Lease) error {
	return d.Apply([]placement.Change{{Put: &l}})
}

// DeleteLease removes a lease (implements placement.Store).
func (d *DB) DeleteLease(id string) error {
	return d.Apply([]placement.Change{{Delete: id}})
}

// Leases returns every stored lease.
func (d *DB) Leases() ([]placement.Lease, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var stored []placement.Lease
	err := guard(func() (err error) {
		stored, err = d.storedLeases()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read leases from %s: %w", d.path, err)
	}
	return overlay(stored, d.wal.pending), nil
}

// overlay applies the journal's pending changes to the leases bbolt has.
func overlay(stored []placement.Lease, pending map[string]*placement.Lease) []placement.Lease {
	if len(pending) == 0 {
		return stored
	}
	out := stored[:0]
	for _, l := range stored {
		if _, changed := pending[l.ID]; !changed {
			out = append(out, l)
		}
	}
	for _, l := range pending {
		if l != nil {
			out = append(out, *l)
		}
	}
	return out
}

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

// storedLeases decodes the leases in bbolt, in key order.
func (d *DB) storedLeases() ([]placement.Lease, error) {
	return list(d.db, bucketLeases, decodeLease)
}

// List decodes every value of bucket from JSON, in key order.
func List[T any](db *bolt.DB, bucket []byte) ([]T, error) {
	return list(db, bucket, func(v []byte, t *T) error { return json.Unmarshal(v, t) })
}

func list[T any](db *bolt.DB, bucket []byte, decode func([]byte, *T) error) ([]T, error) {
	var out []T
	err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		var keys, vals [][]byte // valid for the transaction
		if err := b.ForEach(func(k, v []byte) error {
			keys, vals = append(keys, k), append(vals, v)
			return nil
		}); err != nil {
			return err
		}
		out = make([]T, len(vals))
		return decodeAll(vals, out, decode, func(i int, err error) error {
			return fmt.Errorf("decode %s/%s: %w", bucket, keys[i], err)
		})
	})
	return out, err
}

// decodeAll decodes vals[i] into out[i], on every CPU: a daemon restoring
// 100k leases spends its start-up here.
func decodeAll[T any](vals [][]byte, out []T, decode func([]byte, *T) error, wrap func(int, error) error) error {
	workers := min(runtime.GOMAXPROCS(0), 1+len(vals)/256)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for i := w; i < len(vals); i += workers {
				if err := decode(vals[i], &out[i]); err != nil {
					errs[w] = wrap(i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
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

// SetUnsafeNoFsync turns the lease journal's fdatasync off (on: false).
// For measuring what the disk costs only: a crash can then forget granted
// leases.
func (d *DB) SetUnsafeNoFsync(off bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.wal.noFsync = off
}

// Apply makes several lease changes durable together: appended to the
// lease journal with one fdatasync for a whole group of grants and
// releases (placement's group commit). When the journal has grown past
// walCompactBytes its changes are written into bbolt and it starts over.
func (d *DB) Apply(changes []placement.Change) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.wal.append(changes); err != nil {
		return fmt.Errorf("commit %d lease changes: %w", len(changes), err)
	}
	if d.wal.size >= walCompactBytes {
		return d.compact()
	}
	return nil
}

// writeNet writes the journal's net changes for ids (in key order: bbolt
// inserts into sorted pages, and keys in map order cost a copy of the page's
// tail each — seconds of memmove at 100k) into the leases bucket.
func writeNet(b *bolt.Bucket, ids []string, pending map[string]*placement.Lease) error {
	for _, id := range ids {
		l := pending[id]
		if l == nil {
			if err := b.Delete([]byte(id)); err != nil {
				return err
			}
			continue
		}
		if err := b.Put([]byte(id), encodeLease(nil, l)); err != nil {
			return err
		}
	}
	return nil
}

// compact writes the journal's changes into bbolt in one transaction, then
// empties the journal. A crash between the two replays the journal over
// what bbolt already has: the same result.
func (d *DB) compact() error {
	if len(d.wal.pending) == 0 {
		return nil // an empty journal: nothing to fold, PrevWALName stays
	}
	next := d.seq + 1
	// In key order: bbolt inserts into sorted pages, and keys in map order
	// cost a copy of the page's tail each (seconds of memmove at 100k).
	folded := d.folded
	var ids []string
	err := d.db.Update(func(tx *bolt.Tx) error {
		if err := putBoltSeq(tx, next); err != nil {
			return err
		}
		b := tx.Bucket(bucketLeases)
		if folded == nil {
			folded = map[string]struct{}{}
			if err := b.ForEach(func(k, _ []byte) error { folded[string(k)] = struct{}{}; return nil }); err != nil {
				return err
			}
		}
		ids = ids[:0]
		for id, l := range d.wal.pending {
			if _, in := folded[id]; l != nil || in {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		return writeNet(b, ids, d.wal.pending)
	})
	if err != nil {
		return fmt.Errorf("compact lease journal: %w", err)
	}
	for _, id := range ids {
		if d.wal.pending[id] == nil {
			delete(folded, id)
		} else {
			folded[id] = struct{}{}
		}
	}
	d.folded = folded
	d.seq = next
	if err := writeEpoch(d.dir, next); err != nil { // bbolt one ahead is safe
		return fmt.Errorf("compact lease journal: %w", err)
	}
	return d.wal.reset()
}
