package store

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wsched/wsched/placement"
	bolt "go.etcd.io/bbolt"
)

func lease(id string) placement.Lease {
	return placement.Lease{ID: id, State: placement.StateGranted, GPU: "GPU-a", Bytes: 1 << 30,
		Holder: placement.Holder{PID: 7, UID: 1000}, TTL: time.Minute, Expires: time.Unix(1_800_000_000, 0).UTC()}
}

// crashCopy copies the state files of an open database to a new dir, as a
// kill -9 would leave them: the journal is not compacted.
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	for _, name := range []string{FileName, WALName, EpochName, PrevWALName, nextWALName} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) && name != FileName && name != WALName {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func ids(t *testing.T, db *DB) []string {
	t.Helper()
	ls, err := db.Leases()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.ID)
	}
	slices.Sort(out)
	return out
}

// TestJournalReplay: changes committed to the journal but never compacted
// come back after a crash, on top of what bbolt has.
func TestJournalReplay(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.PutLease(lease("l-old")); err != nil {
		t.Fatal(err)
	}
	db.mu.Lock()
	if err := db.compact(); err != nil { // l-old is in bbolt now
		t.Fatal(err)
	}
	db.mu.Unlock()
	a, b := lease("l-a"), lease("l-b")
	if err := db.Apply([]placement.Change{{Put: &a}, {Put: &b}, {Delete: "l-old"}}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteLease("l-b"); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, db); !slices.Equal(got, []string{"l-a"}) {
		t.Fatalf("open: leases %v", got)
	}
	crashed := crashCopy(t, dir)
	re, err := Open(crashed)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, re); !slices.Equal(got, []string{"l-a"}) {
		t.Errorf("after the crash: leases %v, want [l-a]", got)
	}
	if err := re.Close(); err != nil { // compacts
		t.Fatal(err)
	}
	again, err := Open(crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := ids(t, again); !slices.Equal(got, []string{"l-a"}) || again.wal.size != walFileHeader {
		t.Errorf("after compaction at close: leases %v, journal %d bytes", got, again.wal.size)
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzDecodeRecord: the decoder never panics, never reads past its input,
// and what it accepts encodes back to the same bytes' meaning.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range []walRecord{{Put: ptr(lease("l-1"))}, {Del: "l-2"}} {
		b := appendRecord(nil, 1, r)
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Add([]byte{})
	f.Add(make([]byte, 8))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := decodeRecord(b, 1)
		if err != nil {
			return
		}
		if n <= walHeader+1 || n > len(b) {
			t.Fatalf("size %d of %d bytes", n, len(b))
		}
		again := appendRecord(nil, 1, r)
		r2, n2, err := decodeRecord(again, 1)
		if err != nil || n2 != len(again) || (r2.Put == nil) != (r.Put == nil) || r2.Del != r.Del {
			t.Fatalf("round trip: %+v %d %v", r2, n2, err)
		}
	})
}

// FuzzScanJournal: reading any journal never panics; what it calls a torn
// tail lies past every valid record and is followed by zeros only, and
// repair's salvage finds at least the records before the damage.
func FuzzScanJournal(f *testing.F) {
	base := appendHead(nil, walHead{gen: 1})
	for _, r := range []walRecord{{Put: ptr(lease("l-1"))}, {Del: "l-2"}} {
		base = appendRecord(base, 1, r)
	}
	f.Add(base, 0)
	f.Add(base[:len(base)-3], 0)
	f.Add(append(slices.Clone(base), 0, 0, 1), len(base))
	f.Fuzz(func(t *testing.T, data []byte, checkpoint int) {
		s := scan(data, checkpoint)
		if s.torn != nil && !s.legacy && (s.end < checkpoint || !allZero(data[s.tornTo:])) {
			t.Fatalf("torn tail at %d..%d with checkpoint %d", s.end, s.tornTo, checkpoint)
		}
		if _, n := salvageJournal(data, 1); n < s.records && s.damage != nil {
			t.Fatalf("salvage found %d records, the scan %d before the damage", n, s.records)
		}
	})
}

// TestJournalUnsafeNoFsync: without fsync the records are still written
// and replayed (only durability against a crash is given up).
func TestJournalUnsafeNoFsync(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	db.SetUnsafeNoFsync(true)
	l := lease("l-nosync")
	if err := db.Apply([]placement.Change{{Put: &l}}); err != nil {
		t.Fatal(err)
	}
	re, err := Open(crashCopy(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if got := ids(t, re); !slices.Equal(got, []string{"l-nosync"}) {
		t.Errorf("leases %v, want [l-nosync]", got)
	}
	_ = db.Close()
}

// TestFoldDropsDeletionsBboltNeverHad: a fold skips the deletions of leases
// that never reached bbolt, and still deletes those that did — in bbolt
// before this process opened it (read at the first fold), or folded by it.
func TestFoldDropsDeletionsBboltNeverHad(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := lease("l-old")
	if err := db.PutLease(old); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil { // folds l-old into bbolt
		t.Fatal(err)
	}
	if db, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	fold := func() {
		t.Helper()
		db.mu.Lock()
		defer db.mu.Unlock()
		if err := db.compact(); err != nil {
			t.Fatal(err)
		}
	}
	mid, churn := lease("l-mid"), lease("l-churn")
	for _, c := range []placement.Change{{Delete: old.ID}, {Put: &mid}, {Put: &churn}, {Delete: churn.ID}} {
		if err := db.Apply([]placement.Change{c}); err != nil {
			t.Fatal(err)
		}
	}
	fold()
	if _, ok := db.folded[churn.ID]; ok || len(db.folded) != 1 {
		t.Fatalf("bbolt holds %v after the fold, want only l-mid", db.folded)
	}
	if err := db.DeleteLease(mid.ID); err != nil {
		t.Fatal(err)
	}
	fold()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	re, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if got := ids(t, re); len(got) != 0 {
		t.Errorf("leases %v after their deletions were folded, want none", got)
	}
	var inBolt int
	if err := re.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLeases).ForEach(func(_, _ []byte) error { inBolt++; return nil })
	}); err != nil || inBolt != 0 {
		t.Errorf("bbolt holds %d leases (%v), want 0", inBolt, err)
	}
}
