package store

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// foldedState leaves two folds in dir: l-a in the first, the 4 GiB l-b in
// the second (the last commit bbolt made).
func foldedState(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, id := range []string{"l-a", "l-b"} {
		db, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		l := lease(id)
		l.Bytes = 4 << 30
		if err := db.PutLease(l); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil { // folds the journal
			t.Fatal(err)
		}
	}
	return dir
}

// newestMeta returns the file offset of the meta page with the highest
// transaction ID (bbolt's pages 0 and 1: a 16-byte page header, then
// magic, version, page size, flags, root bucket (16), freelist, pgid,
// txid, checksum).
func newestMeta(t *testing.T, data []byte) int {
	t.Helper()
	pageSize := int(binary.LittleEndian.Uint32(data[16+8:]))
	txid := func(off int) uint64 { return binary.LittleEndian.Uint64(data[off+64:]) }
	if txid(pageSize) > txid(0) {
		return pageSize
	}
	return 0
}

func mustDamaged(t *testing.T, dir string) {
	t.Helper()
	db, err := Open(dir)
	if err == nil {
		ids := ids(t, db)
		db.Close()
		t.Fatalf("Open of a damaged state succeeded with leases %v; want ErrDamaged", ids)
	}
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "wsched state check") ||
		!strings.Contains(err.Error(), filepath.Join(dir, FileName)) {
		t.Fatalf("Open: %v; want ErrDamaged naming the file and 'wsched state check'", err)
	}
	r, err := Check(dir)
	if err != nil || len(r.Problems) == 0 {
		t.Fatalf("Check: %+v, %v; want problems", r, err)
	}
}

// TestDamagedMetaPageRefused: a damaged newest meta page makes bbolt fall
// back to the previous commit, which lacks l-b; Open refuses, and repair
// rebuilds a database with l-b from the journal folded last.
func TestDamagedMetaPageRefused(t *testing.T) {
	dir := foldedState(t)
	path := filepath.Join(dir, FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[newestMeta(t, data)+72] ^= 0xff // its checksum
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	mustDamaged(t, dir)
	rep, err := Repair(dir, time.Unix(1_800_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.MovedAside) == 0 || !slices.Contains(rep.Buckets, string(bucketLeases)) {
		t.Errorf("repair: %+v", rep)
	}
	if _, err := os.Stat(path + ".damaged-20270115T080000Z"); err != nil {
		t.Errorf("damaged file not kept aside: %v", err)
	}
	db, err := Open(dir)
	if err != nil {
		t.Fatalf("open after repair: %v", err)
	}
	defer db.Close()
	if got := ids(t, db); !slices.Equal(got, []string{"l-a", "l-b"}) {
		t.Errorf("leases after repair: %v, want [l-a l-b] (l-b from the journal folded last)", got)
	}
}

func TestEmptyOrMissingDBRefused(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		dir := foldedState(t)
		if err := os.Truncate(filepath.Join(dir, FileName), 0); err != nil {
			t.Fatal(err)
		}
		mustDamaged(t, dir)
	})
	t.Run("missing", func(t *testing.T) {
		dir := foldedState(t)
		if err := os.Remove(filepath.Join(dir, FileName)); err != nil {
			t.Fatal(err)
		}
		mustDamaged(t, dir)
		if _, err := Repair(dir, time.Now()); err != nil {
			t.Fatal(err)
		}
		db, err := Open(dir)
		if err != nil {
			t.Fatalf("open after repair: %v", err)
		}
		defer db.Close()
		if got := ids(t, db); !slices.Equal(got, []string{"l-b"}) {
			t.Errorf("leases rebuilt from the journals alone: %v, want [l-b]", got)
		}
	})
}

// TestBothMetaPagesDamaged: bbolt cannot open the file at all.
func TestBothMetaPagesDamaged(t *testing.T) {
	dir := foldedState(t)
	path := filepath.Join(dir, FileName)
	data, _ := os.ReadFile(path)
	pageSize := int(binary.LittleEndian.Uint32(data[16+8:]))
	data[72] ^= 0xff
	data[pageSize+72] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	mustDamaged(t, dir)
}

// TestDamagedPagesNoPanic: garbage over every data page gives an error
// naming the file, not a panic.
func TestDamagedPagesNoPanic(t *testing.T) {
	dir := foldedState(t)
	path := filepath.Join(dir, FileName)
	data, _ := os.ReadFile(path)
	pageSize := int(binary.LittleEndian.Uint32(data[16+8:]))
	for i := 2 * pageSize; i < len(data); i++ {
		data[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir)
	if err == nil {
		_, err = db.Leases()
		db.Close()
	}
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) {
		t.Fatalf("garbage pages: %v; want ErrDamaged naming %s", err, path)
	}
	if r, err := Check(dir); err != nil || len(r.Problems) == 0 {
		t.Fatalf("Check: %+v, %v; want problems", r, err)
	}
}

// TestEpochAheadAfterCrash: a crash between a fold and its side file leaves
// bbolt one commit ahead, which opens (and fixes the side file).
func TestEpochAheadAfterCrash(t *testing.T) {
	dir := foldedState(t)
	if err := writeEpoch(dir, epoch{seq: 1, gen: 2}); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if e, _ := readEpoch(dir); e.seq != 2 || e.gen != 3 {
		t.Errorf("side file after open: %+v, want commit 2 of journal 3", e)
	}
	r, err := Check(dir)
	if err != nil || len(r.Problems) != 0 || r.Seq != 2 || len(r.Leases) != 2 {
		t.Errorf("Check of a healthy state: %+v, %v", r, err)
	}
}

func TestCheckWhileOpenIsLocked(t *testing.T) {
	dir := foldedState(t)
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := Check(dir); !errors.Is(err, ErrLocked) {
		t.Errorf("Check while open: %v, want ErrLocked", err)
	}
	if _, err := Repair(dir, time.Now()); !errors.Is(err, ErrLocked) {
		t.Errorf("Repair while open: %v, want ErrLocked", err)
	}
}
