package store

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	for _, name := range []string{FileName, WALName} {
		data, err := os.ReadFile(filepath.Join(dir, name))
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
	re, err := Open(crashCopy(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, re); !slices.Equal(got, []string{"l-a"}) {
		t.Errorf("after the crash: leases %v, want [l-a]", got)
	}
	if err := re.Close(); err != nil { // compacts
		t.Fatal(err)
	}
	again, err := Open(re.wal.f.Name()[:len(re.wal.f.Name())-len(WALName)-1])
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := ids(t, again); !slices.Equal(got, []string{"l-a"}) || again.wal.size != 0 {
		t.Errorf("after compaction at close: leases %v, journal %d bytes", got, again.wal.size)
	}
}

// TestJournalTornTail: a record cut short or corrupted at the end of the
// journal (where the file was grown with zeros, or past them) is dropped
// and truncated, with a log line; the records before it are kept. Zeros
// alone are the clean end.
func TestJournalTornTail(t *testing.T) {
	whole := appendRecord(nil, walRecord{Put: ptr(lease("l-torn"))})
	flipped := slices.Clone(whole)
	flipped[len(flipped)-2] ^= 0x20
	huge := binary.LittleEndian.AppendUint32(nil, 1<<30)
	for name, tail := range map[string][]byte{
		"header cut": whole[:5], "payload cut": whole[:walHeader+3], "crc mismatch": flipped,
		"absurd length": append(huge, 0, 0, 0, 0, 1, 2), "zeros": make([]byte, 64),
		"garbage past the zeros": append(make([]byte, walChunk), 1),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.PutLease(lease("l-kept")); err != nil {
				t.Fatal(err)
			}
			crashed := crashCopy(t, dir)
			walPath := filepath.Join(crashed, WALName)
			data, err := os.ReadFile(walPath)
			if err != nil {
				t.Fatal(err)
			}
			_, _, end, _ := replay(data)
			if len(data)%walChunk != 0 || allZero(data[:end]) || !allZero(data[end:]) {
				t.Fatalf("journal of %d bytes, records end at %d: want records, then zeros to a whole chunk", len(data), end)
			}
			f, err := os.OpenFile(walPath, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.WriteAt(tail, int64(end)) // where the next record goes
			f.Close()
			var logs bytes.Buffer
			re, err := OpenLogged(crashed, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer re.Close()
			if got := ids(t, re); !slices.Equal(got, []string{"l-kept"}) {
				t.Errorf("leases %v, want [l-kept]", got)
			}
			if name == "zeros" {
				if logs.Len() != 0 {
					t.Errorf("zeros are the clean end, logged: %s", logs.String())
				}
				return
			}
			if !strings.Contains(logs.String(), "torn tail truncated") || !strings.Contains(logs.String(), "offset="+strconv.Itoa(end)) {
				t.Errorf("log: %s", logs.String())
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzDecodeRecord: the decoder never panics, never reads past its input,
// and what it accepts encodes back to the same bytes' meaning.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range []walRecord{{Put: ptr(lease("l-1"))}, {Del: "l-2"}} {
		b := appendRecord(nil, r)
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Add([]byte{})
	f.Add(make([]byte, 8))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := decodeRecord(b)
		if err != nil {
			return
		}
		if n <= walHeader || n > len(b) {
			t.Fatalf("size %d of %d bytes", n, len(b))
		}
		again := appendRecord(nil, r)
		r2, n2, err := decodeRecord(again)
		if err != nil || n2 != len(again) || (r2.Put == nil) != (r.Put == nil) || r2.Del != r.Del {
			t.Fatalf("round trip: %+v %d %v", r2, n2, err)
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
