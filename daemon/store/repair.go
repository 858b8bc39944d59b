package store

import (
	"encoding/binary"
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
	// JournalRecords are the valid journal records replayed.
	JournalRecords int `json:"journal_records"`
}

// Repair rebuilds the state in dir: whatever the damaged database still
// yields (bbolt's last valid commit, bucket by bucket; lease values that
// fail their checksum are dropped and listed in Lost) with the lease
// journals (the one folded last and the current one: every valid record,
// on both sides of any damage) replayed over it goes into a new database
// and a new journal; the damaged files are moved aside with the time in
// their names, and the commit epoch starts again at 1. The daemon must not
// run: the read of the old database takes bbolt's file lock, and the new
// one is written under it. The daemon reconciles the restored leases
// against live holders and the GPUs when it starts.
func Repair(dir string, now time.Time) (Repaired, error) {
	var rep Repaired
	path := filepath.Join(dir, FileName)
	data, err := salvage(path, &rep)
	if err != nil {
		return rep, err
	}
	pending := repairJournals(dir, data, &rep)
	suffix := ".damaged-" + now.UTC().Format("20060102T150405Z")
	for _, name := range []string{FileName, WALName, PrevWALName, nextWALName, EpochName} {
		old := filepath.Join(dir, name)
		if _, err := os.Stat(old); err != nil {
			continue
		}
		if err := os.Rename(old, old+suffix); err != nil {
			return rep, fmt.Errorf("repair: move %s aside: %w", old, err)
		}
		rep.MovedAside = append(rep.MovedAside, old+suffix)
	}
	if err := rebuild(path, data, pending, &rep); err != nil {
		return rep, fmt.Errorf("repair: write %s: %w", path, err)
	}
	w, err := newJournal(dir, walHead{gen: 1, base: 1}, rep.Leases)
	if err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	_ = w.close()
	if err := writeEpoch(dir, epoch{seq: 1, gen: 1, length: walFileHeader}); err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	return rep, syncDir(dir)
}

// repairJournals returns the net effect of the valid records of the
// journal folded last and the current one: replaying the folded one over a
// commit that already has it changes nothing, over the commit before it
// restores the fold a damaged meta page lost.
func repairJournals(dir string, data map[string]map[string][]byte, rep *Repaired) map[string]*placement.Lease {
	var gens []uint64
	if meta := data[string(bucketMeta)]; meta != nil {
		if v := meta[string(keyJournal)]; len(v) == 8 {
			g := binary.BigEndian.Uint64(v)
			gens = append(gens, g, g-1)
		}
	}
	if ep, err := readEpoch(dir); err == nil && ep.gen > 0 {
		gens = append(gens, ep.gen, ep.gen-1)
	}
	pending := map[string]*placement.Lease{}
	for _, name := range []string{PrevWALName, WALName} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if name == WALName && len(b) == 0 && len(gens) > 0 {
			rep.Lost = append(rep.Lost, fmt.Sprintf("%s is missing or empty: the leases granted since the last fold are not restored",
				filepath.Join(dir, name)))
		}
		if err != nil {
			continue
		}
		p, n := salvageJournal(b, gens...)
		maps.Copy(pending, p)
		rep.JournalRecords += n
	}
	return pending
}

// rebuild writes the new database: the salvaged buckets (the leases
// re-encoded, those that do not decode dropped), the journal folded into
// the leases, commit 1 of journal 1.
func rebuild(path string, data map[string]map[string][]byte, pending map[string]*placement.Lease, rep *Repaired) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for name, kv := range data {
			if name == string(bucketLeases) || name == string(bucketMeta) {
				continue
			}
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
		return foldInto(tx, validLeases(data[string(bucketLeases)], pending, rep), rep)
	})
	return errors.Join(err, db.Close())
}

// validLeases decodes the salvaged lease values, dropping (and listing in
// Lost) those that fail, and applies the journal over them.
func validLeases(kv map[string][]byte, pending map[string]*placement.Lease, rep *Repaired) map[string]*placement.Lease {
	out := map[string]*placement.Lease{}
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		l := new(placement.Lease)
		err := decodeLease(kv[k], l)
		if err == nil && l.ID != k {
			err = fmt.Errorf("%w: the value is lease %q", errLeaseCodec, l.ID)
		}
		if err != nil {
			if _, inJournal := pending[k]; !inJournal {
				rep.Lost = append(rep.Lost, fmt.Sprintf("lease %s: %v", k, err))
			}
			continue
		}
		out[k] = l
	}
	maps.Copy(out, pending)
	return out
}

// foldInto writes the leases into the leases bucket and starts the epoch
// at commit 1 of journal 1.
func foldInto(tx *bolt.Tx, leases map[string]*placement.Lease, rep *Repaired) error {
	b, err := tx.CreateBucketIfNotExists(bucketLeases)
	if err != nil {
		return err
	}
	if err := writeNet(b, slices.Sorted(maps.Keys(leases)), leases); err != nil {
		return err
	}
	rep.Leases = len(leases)
	for _, put := range []func(*bolt.Tx) error{
		func(tx *bolt.Tx) error { return putBoltSeq(tx, 1) },
		func(tx *bolt.Tx) error { return putBoltGen(tx, 1) },
		func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(formatKey, []byte{leaseV2}) },
	} {
		if err := put(tx); err != nil {
			return err
		}
	}
	return nil
}

// salvage copies every bucket of the damaged database that can still be
// read (a missing or unreadable file yields nothing); ErrLocked while a
// daemon holds it.
func salvage(path string, rep *Repaired) (map[string]map[string][]byte, error) {
	out := map[string]map[string][]byte{}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		rep.Lost = append(rep.Lost, fmt.Sprintf("%s is missing or empty: the leases folded into it are not restored "+
			"(only those in the journals are; the daemon marks leases over a GPU's memory)", path))
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
