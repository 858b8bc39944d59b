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
	log  *slog.Logger
	mu   sync.Mutex // serialises the journal
	wal  *wal
	seq  uint64 // the commit epoch (epoch.go)
	path string
	// folded is the set of lease IDs in bbolt, read at the first fold and
	// kept by each: a lease granted and released within one journal never
	// reached bbolt, and its deletion is dropped instead of looked up there
	// (with grant+release churn, most of a journal).
	folded map[string]struct{}
	// epochMu serialises writes of wsched.epoch; written is the last one.
	epochMu sync.Mutex
	written epoch
	// checkpoint, when not nil, writes the journal's length to
	// wsched.epoch shortly after a commit (checkpoint.go).
	checkpoint *time.Timer
	closed     bool
}

var _ placement.Store = (*DB)(nil)

// Open opens (creating if needed) the database in dir, without logging.
func Open(dir string) (*DB, error) { return OpenLogged(dir, nil) }

// OpenLogged opens (creating if needed) the database and the lease journal
// in dir and replays the journal (it is compacted into the database when it
// has grown, and at Close). A torn journal tail is overwritten with zeros
// and logged to log; any other damage, or a journal or database that does
// not match wsched.epoch and each other, fails with ErrDamaged.
func OpenLogged(dir string, log *slog.Logger) (*DB, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	path := filepath.Join(dir, FileName)
	ep, err := readEpoch(dir)
	if err != nil {
		return nil, err
	}
	if err := checkEpoch(path, ep.seq); err != nil {
		return nil, err
	}
	if err := checkSize(path); err != nil {
		return nil, err
	}
	db, err := openBolt(path, bolt.Options{Timeout: time.Second, InitialMmapSize: 64 << 20})
	if err != nil {
		return nil, err
	}
	d := &DB{db: db, dir: dir, log: log, path: path, written: ep}
	if err := d.open(ep); err != nil {
		d.closeFiles()
		return nil, err
	}
	return d, nil
}

// open reads bbolt's commit and opens the journal against it and the
// epoch, finishing what a crash left half done.
func (d *DB) open(ep epoch) error {
	var x expect
	err := guard(func() error { return initBolt(d.db, &x) })
	if err == nil {
		err = guard(func() error { return checkPages(d.db) })
	}
	if err == nil && x.size > 0 {
		if fi, serr := os.Stat(d.path); serr == nil && fi.Size() < x.size {
			err = fmt.Errorf("%w: the file is %d bytes but its pages reach %d (cut short); %s", ErrDamaged, fi.Size(), x.size, damagedHint)
		}
	}
	if err == nil && x.seq < ep.seq {
		return rolledBack(d.path, x.seq, ep.seq)
	}
	if err != nil {
		return fmt.Errorf("init %s: %w", d.path, damaged(err))
	}
	d.seq = x.seq
	x.ep = ep
	if !ep.found && x.gen > 0 && x.seq > 0 {
		return fmt.Errorf("open %s: %w: %s is missing, but the database records commit %d of journal %d; %s",
			d.dir, ErrDamaged, EpochName, x.seq, x.gen, damagedHint)
	}
	if d.wal, err = openJournal(d.dir, x, d.log); err != nil {
		return err
	}
	if d.wal.head.gen != x.gen { // a new journal, or one a crash left unrecorded
		gen := d.wal.head.gen
		if err := guard(func() error { return d.db.Update(func(tx *bolt.Tx) error { return putBoltGen(tx, gen) }) }); err != nil {
			return fmt.Errorf("record journal %d in %s: %w", gen, d.path, damaged(err))
		}
	}
	if d.wal.legacy { // an earlier version's journal: folded at once
		if err := d.compact(); err != nil {
			return fmt.Errorf("fold the lease journal of an earlier version: %w", err)
		}
	}
	if err := d.writeEpoch(d.mark()); err != nil { // what is there is behind, which Open accepts (a full disk)
		d.log.Warn("cannot update "+EpochName, "err", err)
	}
	return nil
}

// initBolt reads bbolt's commit sequence, journal generation and page
// count, and creates the leases bucket when missing (without a commit when
// it exists, so that opening does not add a commit bbolt could fall back
// to); leases of an earlier version are rewritten with checksums once.
func initBolt(db *bolt.DB, x *expect) error {
	ready := false
	err := db.View(func(tx *bolt.Tx) error {
		x.seq, x.gen, x.size = boltSeq(tx), boltGen(tx), tx.Size()
		meta := tx.Bucket(bucketMeta)
		ready = tx.Bucket(bucketLeases) != nil && meta != nil && string(meta.Get(formatKey)) == string([]byte{leaseV2})
		if b := tx.Bucket(bucketLeases); b != nil {
			x.stored = b.Stats().KeyN
		}
		return nil
	})
	if err != nil || ready {
		return err
	}
	return db.Update(initLeases) // the buckets, and leases of an earlier version rewritten once
}

// checkPages runs bbolt's consistency check over every page: a damaged
// page that the start does not read (the freelist a later write allocates
// from, another bucket) is refused now rather than met as a panic later.
func checkPages(db *bolt.DB) error {
	return db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return fmt.Errorf("%w: page check: %w; %s", ErrDamaged, err, damagedHint)
		}
		return nil
	})
}

// Close compacts the lease journal into the database and closes both.
// A fold that fails (a full disk) leaves the journal, which holds every
// change.
func (d *DB) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.checkpoint != nil {
		d.checkpoint.Stop()
		d.checkpoint = nil
	}
	err := guard(d.compact)
	if err != nil && d.wal.broken == nil {
		d.log.Error("lease journal not folded into the database at close; it is replayed at the next start", "err", err)
		err = d.writeEpoch(d.mark())
	}
	return errors.Join(err, d.closeFiles())
}

func (d *DB) closeFiles() error {
	var err error
	if d.wal != nil {
		err = d.wal.close()
	}
	return errors.Join(err, d.db.Close())
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
	err = guard(func() error {
		return db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucket)
			if err != nil {
				return err
			}
			return b.Put([]byte(key), data)
		})
	})
	if err != nil {
		return fmt.Errorf("store %s/%s: %w", bucket, key, err)
	}
	return nil
}

// Delete removes key from bucket; a missing key is not an error.
func Delete(db *bolt.DB, bucket []byte, key string) error {
	err := guard(func() error {
		return db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucket)
			if b == nil {
				return nil
			}
			return b.Delete([]byte(key))
		})
	})
	if err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	return nil
}

// storedLeases decodes the leases in bbolt, in key order; a value that
// fails its checksum is ErrDamaged, naming its key.
func (d *DB) storedLeases() ([]placement.Lease, error) {
	ls, err := list(d.db, bucketLeases, decodeStored)
	if err != nil && !errors.Is(err, ErrDamaged) {
		err = fmt.Errorf("%w: %w; %s", ErrDamaged, err, damagedHint)
	}
	return ls, err
}

// List decodes every value of bucket from JSON, in key order.
func List[T any](db *bolt.DB, bucket []byte) ([]T, error) {
	var out []T
	err := guard(func() (err error) {
		out, err = list(db, bucket, func(_, v []byte, t *T) error { return json.Unmarshal(v, t) })
		return err
	})
	return out, err
}

func list[T any](db *bolt.DB, bucket []byte, decode func(k, v []byte, t *T) error) ([]T, error) {
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
		return decodeAll(keys, vals, out, decode, func(i int, err error) error {
			return fmt.Errorf("decode %s/%s: %w", bucket, keys[i], err)
		})
	})
	return out, err
}

// decodeAll decodes vals[i] (under keys[i]) into out[i], on every CPU: a
// daemon restoring 100k leases spends its start-up here. The values are in
// bbolt's mapping: each worker is guarded against a fault in it.
func decodeAll[T any](keys, vals [][]byte, out []T, decode func(k, v []byte, t *T) error, wrap func(int, error) error) error {
	workers := min(runtime.GOMAXPROCS(0), 1+len(vals)/256)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			errs[w] = guard(func() error {
				for i := w; i < len(vals); i += workers {
					if err := decode(keys[i], vals[i], &out[i]); err != nil {
						return wrap(i, err)
					}
				}
				return nil
			})
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Get decodes one value; found is false when the key is absent.
func Get[T any](db *bolt.DB, bucket []byte, key string) (t T, found bool, err error) {
	err = guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
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
