package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/placement"
)

// journalState leaves a state dir as a kill -9 would: l-0 folded into
// bbolt, then ls committed to the journal only, the epoch's checkpoint
// written. It returns the dir and the offsets where each of ls's records
// starts, and where the records end.
func journalState(t *testing.T, ls ...placement.Lease) (dir string, starts []int, end int) {
	t.Helper()
	src := t.TempDir()
	db, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutLease(lease("l-0")); err != nil {
		t.Fatal(err)
	}
	db.mu.Lock()
	if err := db.compact(); err != nil {
		t.Fatal(err)
	}
	db.mu.Unlock()
	for _, l := range ls {
		starts = append(starts, int(db.wal.size))
		if err := db.PutLease(l); err != nil {
			t.Fatal(err)
		}
	}
	db.mu.Lock()
	end = int(db.wal.size)
	if err := db.writeEpoch(db.mark()); err != nil { // the checkpoint the timer writes
		t.Fatal(err)
	}
	db.mu.Unlock()
	dir = crashCopy(t, src)
	_ = db.Close()
	return dir, starts, end
}

func mutate(t *testing.T, path string, f func([]byte) []byte) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = f(data)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return data
}

// bigLease is a lease whose record spans more than a sector.
func bigLease(id string) placement.Lease {
	l := lease(id)
	l.Labels = map[string]string{"note": strings.Repeat("x", 1500)}
	return l
}

// TestJournalTornTailDropped: the last record cut at a sector boundary,
// zeros after it, as a crash in mid-write leaves it: the journal opens
// without it, logs the torn tail and overwrites it with zeros.
func TestJournalTornTailDropped(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.PutLease(lease("l-kept")); err != nil {
		t.Fatal(err)
	}
	crashed := crashCopy(t, dir) // the checkpoint did not run: the torn record is past it
	path := filepath.Join(crashed, WALName)
	end := int(db.wal.size)
	rec := appendRecord(nil, db.wal.head.gen, walRecord{Put: ptr(bigLease("l-torn"))})
	cut := (end+walHeader+sectorSize-1)/sectorSize*sectorSize - end // the write stopped at this sector boundary
	mutate(t, path, func(b []byte) []byte { copy(b[end:], rec[:cut]); return b })
	var logs bytes.Buffer
	re, err := OpenLogged(crashed, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, re); !slices.Equal(got, []string{"l-kept"}) {
		t.Errorf("leases %v, want [l-kept]", got)
	}
	if !strings.Contains(logs.String(), "torn tail") || !strings.Contains(logs.String(), fmt.Sprintf("offset=%d", end)) {
		t.Errorf("log: %s", logs.String())
	}
	re.Close()
	data, _ := os.ReadFile(path)
	if s := scan(data, 0); s.torn != nil || s.damage != nil {
		t.Errorf("after the start the journal still reads as torn (%v) or damaged (%v)", s.torn, s.damage)
	}
}

// TestJournalCorruptionRefused: damage that is not a torn tail — a bit
// flipped in the last or a middle record, zeros in the middle, garbage
// past the zeros, a damaged length, a cut-short file, records zeroed
// before the checkpoint — refuses to start, naming the file and the
// offset, leaves the file as it was, is reported by Check, and Repair
// brings back every record on both sides of the damage.
func TestJournalCorruptionRefused(t *testing.T) {
	ls := []placement.Lease{lease("l-1"), lease("l-2"), bigLease("l-3")}
	cases := []struct {
		name string
		at   func(starts []int, end int) int // the offset the error names
		do   func(b []byte, starts []int, end int) []byte
		lost []string // leases repair cannot bring back
	}{
		{"bit flipped in the last record", func(s []int, _ int) int { return s[2] },
			func(b []byte, s []int, _ int) []byte { b[s[2]+40] ^= 0x10; return b }, []string{"l-3"}},
		{"bit flipped in a middle record", func(s []int, _ int) int { return s[1] },
			func(b []byte, s []int, _ int) []byte { b[s[1]+20] ^= 0x01; return b }, []string{"l-2"}},
		{"zeros in the middle", func(s []int, _ int) int { return s[1] },
			func(b []byte, s []int, _ int) []byte { clear(b[s[1] : s[1]+30]); return b }, []string{"l-2"}},
		{"garbage past the zeros", func(_ []int, e int) int { return e },
			func(b []byte, _ []int, e int) []byte { b[e+5000] = 1; return b }, nil},
		{"length field damaged", func(s []int, _ int) int { return s[2] },
			func(b []byte, s []int, _ int) []byte { b[s[2]+1] ^= 0x40; return b }, []string{"l-3"}},
		{"file cut short", func(_ []int, e int) int { return e + 100 },
			func(b []byte, _ []int, e int) []byte { return b[:e+100] }, nil},
		{"last record zeroed before the checkpoint", func(s []int, _ int) int { return s[2] },
			func(b []byte, s []int, e int) []byte { clear(b[s[2]:e]); return b }, []string{"l-3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, starts, end := journalState(t, ls...)
			path := filepath.Join(dir, WALName)
			damaged := mutate(t, path, func(b []byte) []byte { return c.do(b, starts, end) })
			_, err := Open(dir)
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) ||
				!strings.Contains(err.Error(), fmt.Sprintf("offset %d", c.at(starts, end))) {
				t.Fatalf("Open: %v; want ErrDamaged naming %s and offset %d", err, path, c.at(starts, end))
			}
			if now, _ := os.ReadFile(path); !bytes.Equal(now, damaged) {
				t.Fatal("the refused start changed the journal")
			}
			r, err := Check(dir)
			if err != nil || len(r.Problems) == 0 {
				t.Fatalf("Check: %+v, %v; want a problem", r, err)
			}
			if _, err := Repair(dir, time.Now()); err != nil {
				t.Fatal(err)
			}
			db, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var want []string
			for _, id := range []string{"l-0", "l-1", "l-2", "l-3"} {
				if !slices.Contains(c.lost, id) {
					want = append(want, id)
				}
			}
			if got := ids(t, db); !slices.Equal(got, want) {
				t.Errorf("after repair: %v, want %v", got, want)
			}
		})
	}
}

// TestJournalLossRefused (issue 25 item 3): a journal deleted, emptied,
// replaced by an older copy of itself or by the journal folded before it,
// and a database and epoch deleted together, are refused: the leases only
// the journal held would be gone.
func TestJournalLossRefused(t *testing.T) {
	for name, do := range map[string]func(t *testing.T, dir string, older []byte){
		"journal deleted": func(t *testing.T, dir string, _ []byte) { must(t, os.Remove(filepath.Join(dir, WALName))) },
		"journal emptied": func(t *testing.T, dir string, _ []byte) {
			mutate(t, filepath.Join(dir, WALName), func([]byte) []byte { return nil })
		},
		"journal rolled back": func(t *testing.T, dir string, older []byte) {
			must(t, os.WriteFile(filepath.Join(dir, WALName), older, 0o600))
		},
		"journal replaced by the folded one": func(t *testing.T, dir string, _ []byte) {
			must(t, os.Rename(filepath.Join(dir, PrevWALName), filepath.Join(dir, WALName)))
		},
		"journal and epoch deleted": func(t *testing.T, dir string, _ []byte) {
			must(t, os.Remove(filepath.Join(dir, WALName)))
			must(t, os.Remove(filepath.Join(dir, EpochName)))
		},
		"database and epoch deleted": func(t *testing.T, dir string, _ []byte) {
			must(t, os.Remove(filepath.Join(dir, FileName)))
			must(t, os.Remove(filepath.Join(dir, EpochName)))
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir, _, _ := journalState(t, lease("l-1"))
			older, err := os.ReadFile(filepath.Join(dir, WALName))
			must(t, err)
			db, err := Open(dir) // one more lease in the same journal
			must(t, err)
			must(t, db.PutLease(lease("l-2")))
			db.mu.Lock()
			must(t, db.writeEpoch(db.mark()))
			db.mu.Unlock()
			dir2 := crashCopy(t, dir)
			db.Close()
			do(t, dir2, older)
			re, err := Open(dir2)
			if err == nil {
				got := ids(t, re)
				re.Close()
				t.Fatalf("opened with leases %v; want ErrDamaged", got)
			}
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "wsched state check") {
				t.Fatalf("Open: %v; want ErrDamaged with the hint", err)
			}
			if r, err := Check(dir2); err != nil || len(r.Problems) == 0 {
				t.Fatalf("Check: %+v, %v; want a problem", r, err)
			}
		})
	}
}

// TestJournalOnlyLeasesKeptWithoutDatabase: before the first fold every
// lease is in the journal alone; with the database and the epoch deleted
// the journal (over commit 0) restores them all.
func TestJournalOnlyLeasesKeptWithoutDatabase(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	must(t, err)
	must(t, db.PutLease(lease("l-1")))
	crashed := crashCopy(t, dir)
	db.Close()
	must(t, os.Remove(filepath.Join(crashed, FileName)))
	_ = os.Remove(filepath.Join(crashed, EpochName))
	re, err := Open(crashed)
	must(t, err)
	defer re.Close()
	if got := ids(t, re); !slices.Equal(got, []string{"l-1"}) {
		t.Errorf("leases %v, want [l-1]", got)
	}
}

// TestLeaseValueFlipRefused (issue 25 item 4): a flipped bit in a stored
// lease value fails the read naming the key (it used to decode into
// another lease, or drop it); repair drops that value and says so.
func TestLeaseValueFlipRefused(t *testing.T) {
	dir := foldedState(t)
	path := filepath.Join(dir, FileName)
	mutate(t, path, func(b []byte) []byte {
		at := bytes.LastIndex(b, []byte("l-b")) // the value's own copy of the ID, the key before it
		b[at+12] ^= 0x04
		return b
	})
	db, err := Open(dir)
	must(t, err)
	_, err = db.Leases()
	db.Close()
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "leases/l-b") {
		t.Fatalf("Leases: %v; want ErrDamaged naming leases/l-b", err)
	}
	if r, err := Check(dir); err != nil || len(r.Problems) == 0 || !strings.Contains(strings.Join(r.Problems, " "), "l-b") {
		t.Fatalf("Check: %+v, %v", r, err)
	}
	if _, err := Repair(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir) // l-b from the journal folded last
	must(t, err)
	defer db.Close()
	if got := ids(t, db); !slices.Equal(got, []string{"l-a", "l-b"}) {
		t.Errorf("after repair: %v, want [l-a l-b]", got)
	}
}

// TestCutShortDatabaseRefused (issue 25 item 5): a database file cut
// shorter than its pages is refused with ErrDamaged, not a SIGBUS in the
// mapping.
func TestCutShortDatabaseRefused(t *testing.T) {
	dir := foldedState(t)
	path := filepath.Join(dir, FileName)
	mutate(t, path, func(b []byte) []byte { return b[:3*4096] })
	_, err := Open(dir)
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("Open: %v; want ErrDamaged (cut short)", err)
	}
	if r, err := Check(dir); err != nil || len(r.Problems) == 0 {
		t.Fatalf("Check: %+v, %v", r, err)
	}
}

// TestDamagedFreelistRefused (issue 25 item 5): a damaged page the lease
// read never touches (here the freelist, which the fold at Close would
// allocate from: a raw bbolt panic) is found by the page check at Open.
func TestDamagedFreelistRefused(t *testing.T) {
	dir := foldedState(t)
	path := filepath.Join(dir, FileName)
	mutate(t, path, func(b []byte) []byte {
		meta := newestMeta(t, b)
		pageSize := int(binary.LittleEndian.Uint32(b[24:]))
		free := int(binary.LittleEndian.Uint64(b[meta+48:]))
		for i := free * pageSize; i < (free+1)*pageSize; i++ {
			b[i] = byte(i*13 + 5)
		}
		return b
	})
	db, err := Open(dir)
	if err == nil {
		db.Close()
		t.Fatal("opened a database with a damaged freelist")
	}
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open: %v; want ErrDamaged naming %s", err, path)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCrashInFoldFinished: a crash after a fold's bbolt transaction, before
// the journals were switched, leaves bbolt ahead with the next journal
// beside the folded one; Open finishes the switch and keeps every lease.
func TestCrashInFoldFinished(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	must(t, err)
	defer db.Close()
	must(t, db.PutLease(lease("l-1")))
	db.mu.Lock()
	head := walHead{gen: db.wal.head.gen + 1, base: db.seq + 1}
	f, _, err := createJournal(dir, head, 0)
	must(t, err)
	f.Close()
	_, _, err = db.foldTx(head.base, head.gen)
	must(t, err)
	crashed := crashCopy(t, dir)
	db.mu.Unlock()
	re, err := Open(crashed)
	must(t, err)
	defer re.Close()
	if got := ids(t, re); !slices.Equal(got, []string{"l-1"}) || re.wal.head != head {
		t.Errorf("leases %v, journal %+v; want [l-1] in journal %+v", got, re.wal.head, head)
	}
}
