package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wsched/wsched/placement"
)

// checkpointDelay is how soon after a commit the journal's length is
// written to wsched.epoch (one write for all the commits in between).
const checkpointDelay = 50 * time.Millisecond

// Apply makes several lease changes durable together: appended to the
// lease journal with one fdatasync for a whole group of grants and
// releases (placement's group commit). When the journal has grown past
// walCompactBytes its changes are written into bbolt and a new journal
// starts; a fold that fails (a full disk) is logged and tried again at the
// next commit: the changes are durable in the journal either way.
func (d *DB) Apply(changes []placement.Change) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.wal.append(changes); err != nil {
		return fmt.Errorf("commit %d lease changes: %w", len(changes), err)
	}
	if d.wal.size >= walCompactBytes {
		if err := guard(d.compact); err != nil {
			d.log.Error("lease journal not folded into the database; trying again at the next commit", "err", err)
		}
	}
	d.scheduleCheckpoint()
	return nil
}

// scheduleCheckpoint arms the timer that records the journal's length in
// wsched.epoch (callers hold d.mu). Without fsync nothing is recorded: the
// records might not be on disk.
func (d *DB) scheduleCheckpoint() {
	if d.checkpoint != nil || d.closed || d.wal.noFsync {
		return
	}
	d.checkpoint = time.AfterFunc(checkpointDelay, func() {
		d.mu.Lock()
		d.checkpoint = nil
		m, closed := d.mark(), d.closed
		d.mu.Unlock()
		if closed {
			return
		}
		if err := d.writeEpoch(m); err != nil {
			d.log.Warn("cannot record the lease journal's length", "err", err)
		}
	})
}

// mark is what wsched.epoch should record now (callers hold d.mu).
func (d *DB) mark() epoch {
	return epoch{seq: d.seq, gen: d.wal.head.gen, length: d.wal.size, found: true}
}

// writeEpoch writes m to wsched.epoch unless what is there records as
// much already (checkpoints and folds race to it).
func (d *DB) writeEpoch(m epoch) error {
	d.epochMu.Lock()
	defer d.epochMu.Unlock()
	if d.written.found && !m.newer(d.written) {
		return nil
	}
	if err := writeEpoch(d.dir, m); err != nil {
		return err
	}
	d.written = m
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

// compact folds the journal into bbolt and starts the next one:
//
//  1. the next journal is created as leases.wal.next (its header names the
//     commit it follows), with room for the deletion reserve, and synced;
//  2. one bbolt transaction writes the changes, the commit sequence and the
//     next journal's generation;
//  3. leases.wal becomes leases.wal.prev and leases.wal.next leases.wal;
//  4. wsched.epoch records the new commit and journal.
//
// A crash after 2 leaves bbolt ahead of the journal on disk, with the next
// one beside it: Open finishes 3 and 4. Nothing is changed when 1 or 2
// fails (a full disk): the journal keeps every change.
func (d *DB) compact() error {
	if len(d.wal.pending) == 0 && !d.wal.legacy {
		return nil // an empty journal: nothing to fold, PrevWALName stays
	}
	if d.wal.broken != nil {
		return fmt.Errorf("compact lease journal: %w", d.wal.broken)
	}
	next := d.seq + 1
	head := walHead{gen: d.wal.head.gen + 1, base: next}
	f, alloc, err := createJournal(d.dir, head, d.wal.reserve())
	if err != nil {
		return fmt.Errorf("compact lease journal: %w", err)
	}
	folded, ids, err := d.foldTx(next, head.gen)
	if err != nil {
		_ = f.Close()
		_ = os.Remove(filepath.Join(d.dir, nextWALName))
		return fmt.Errorf("compact lease journal: %w", err)
	}
	if err := switchJournal(d.dir); err != nil {
		_ = f.Close()
		d.wal.broken = err // bbolt has the fold, the old journal must not grow
		return fmt.Errorf("compact lease journal: %w", err)
	}
	for _, id := range ids {
		if d.wal.pending[id] == nil {
			delete(folded, id)
		} else {
			folded[id] = struct{}{}
		}
	}
	d.folded, d.seq = folded, next
	_ = d.wal.f.Close()
	w := d.wal
	w.f, w.head, w.size, w.alloc, w.legacy, w.stored = f, head, walFileHeader, alloc, false, len(folded)
	clear(w.pending)
	if err := d.writeEpoch(d.mark()); err != nil { // bbolt one ahead is safe
		d.log.Warn("cannot record the fold in "+EpochName+"; the next start does", "err", err)
	}
	return nil
}

// foldTx writes the journal's changes, the commit sequence and the next
// journal's generation into bbolt in one transaction, and returns the set
// of lease IDs bbolt had and the IDs it wrote.
func (d *DB) foldTx(seq, gen uint64) (map[string]struct{}, []string, error) {
	folded := d.folded
	var ids []string
	err := d.db.Update(func(tx *bolt.Tx) error {
		if err := putBoltSeq(tx, seq); err != nil {
			return err
		}
		if err := putBoltGen(tx, gen); err != nil {
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
	return folded, ids, err
}

// switchJournal makes the folded journal leases.wal.prev and the next one
// leases.wal, durably.
func switchJournal(dir string) error {
	cur := filepath.Join(dir, WALName)
	if err := os.Rename(cur, filepath.Join(dir, PrevWALName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("keep the folded lease journal: %w", err)
	}
	if err := os.Rename(filepath.Join(dir, nextWALName), cur); err != nil {
		return fmt.Errorf("start the next lease journal: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("start the next lease journal: %w", err)
	}
	return nil
}
