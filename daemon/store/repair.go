package store

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wsched/wsched/placement"
)

// Repaired is what Repair did.
type Repaired struct {
	// MovedAside are the damaged files' new names.
	MovedAside []string `json:"moved_aside"`
	// Buckets are the buckets copied from the damaged database, Lost what
	// could not be read from it.
	Buckets []string `json:"buckets"`
	Lost    []string `json:"lost,omitempty"`
	Leases  int      `json:"leases"`
}

// Repair rebuilds the state in dir: whatever the damaged database still
// yields (bbolt's last valid commit, bucket by bucket) with the lease
// journals (the one folded last and the current one) replayed over it goes
// into a new database; the damaged database
// and journal are moved aside with the time in their names, and the
// commit epoch starts again at 1. The daemon must not run: the read of
// the old database takes bbolt's file lock, and the new one is written
// under it. The daemon reconciles the restored leases against live
// holders and the GPUs when it starts.
func Repair(dir string, now time.Time) (Repaired, error) {
	var rep Repaired
	path := filepath.Join(dir, FileName)
	data, err := salvage(path, &rep)
	if err != nil {
		return rep, err
	}
	// The journal folded last, then the current one (their valid records;
	// a torn tail is dropped): replaying the folded one over a commit that
	// already has it changes nothing, over the commit before it restores
	// the fold a damaged meta page lost.
	pending, _, _ := readJournal(dir, PrevWALName)
	current, _, _ := readJournal(dir, WALName)
	if pending == nil {
		pending = map[string]*placement.Lease{}
	}
	maps.Copy(pending, current)
	suffix := ".damaged-" + now.UTC().Format("20060102T150405Z")
	for _, name := range []string{FileName, WALName, PrevWALName, EpochName} {
		old := filepath.Join(dir, name)
		if _, err := os.Stat(old); err != nil {
			continue
		}
		if err := os.Rename(old, old+suffix); err != nil {
			return rep, fmt.Errorf("repair: move %s aside: %w", old, err)
		}
		rep.MovedAside = append(rep.MovedAside, old+suffix)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return rep, fmt.Errorf("repair: create %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for name, kv := range data {
			b, err := tx.CreateBucketIfNotExists([]byte(name))
			if err != nil {
				return err
			}
			for k, v := range kv {
				if err := b.Put([]byte(k), v); err != nil {
					return err
				}
			}
		}
		return foldInto(tx, pending, &rep)
	})
	err = errors.Join(err, db.Close())
	if err == nil {
		err = writeEpoch(dir, 1)
	}
	if err != nil {
		return rep, fmt.Errorf("repair: write %s: %w", path, err)
	}
	return rep, syncDir(dir)
}

// foldInto applies the journal to the leases bucket and starts the epoch
// at 1.
func foldInto(tx *bolt.Tx, pending map[string]*placement.Lease, rep *Repaired) error {
	b, err := tx.CreateBucketIfNotExists(bucketLeases)
	if err != nil {
		return err
	}
	if err := writeNet(b, slices.Sorted(maps.Keys(pending)), pending); err != nil {
		return err
	}
	rep.Leases = 0
	if err := b.ForEach(func(_, _ []byte) error { rep.Leases++; return nil }); err != nil {
		return err
	}
	return putBoltSeq(tx, 1)
}

// salvage copies every bucket of the damaged database that can still be
// read (a missing or unreadable file yields nothing); ErrLocked while a
// daemon holds it.
func salvage(path string, rep *Repaired) (map[string]map[string][]byte, error) {
	out := map[string]map[string][]byte{}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		return out, nil
	}
	db, err := openBolt(path, bolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("repair: %w (stop it first)", err)
	}
	if err != nil {
		rep.Lost = append(rep.Lost, err.Error())
		return out, nil
	}
	defer db.Close()
	var names []string
	_ = guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
				names = append(names, string(name))
				return nil
			})
		})
	})
	for _, name := range names {
		kv := map[string][]byte{}
		err := guard(func() error {
			return db.View(func(tx *bolt.Tx) error {
				return tx.Bucket([]byte(name)).ForEach(func(k, v []byte) error {
					if v != nil { // nested buckets are not used
						kv[string(k)] = append([]byte(nil), v...)
					}
					return nil
				})
			})
		})
		if err != nil {
			rep.Lost = append(rep.Lost, fmt.Sprintf("bucket %s: %v", name, err))
			continue
		}
		out[name] = kv
		rep.Buckets = append(rep.Buckets, name)
	}
	return out, nil
}
