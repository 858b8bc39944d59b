package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/wsched/wsched/placement"
)

// expect is what bbolt and wsched.epoch say about the journal.
type expect struct {
	seq    uint64 // bbolt's commit sequence: the journal's base
	gen    uint64 // the journal generation bbolt records (0: none)
	size   int64  // bytes bbolt's pages reach
	stored int    // leases in bbolt
	ep     epoch
}

// openJournal opens leases.wal in dir, checks it against bbolt and the
// epoch (a missing, emptied, rolled-back or foreign journal is ErrDamaged;
// where a crash during a fold left the next journal beside it, the fold is
// finished) and replays it. A torn tail is overwritten with zeros and
// logged; corruption is ErrDamaged naming the file and the offset, with the
// file left as it is.
func openJournal(dir string, x expect, log *slog.Logger) (*wal, error) {
	path := filepath.Join(dir, WALName)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read lease journal: %w", err)
	}
	recorded := max(x.gen, x.ep.gen)
	if len(data) == 0 {
		if recorded > 0 {
			what := "missing"
			if err == nil {
				what = "empty (0 bytes)"
			}
			return nil, fmt.Errorf("open %s: %w: the lease journal is %s but %s records journal %d; %s",
				path, ErrDamaged, what, recordedBy(x), recorded, damagedHint)
		}
		return newJournal(dir, walHead{gen: 1, base: x.seq}, x.stored)
	}
	if head, ok := decodeHead(data); ok {
		if x.gen > 0 && head.gen+1 == x.gen {
			if finished, err := finishFold(dir, x); err != nil || finished {
				if err != nil {
					return nil, err
				}
				return openJournal(dir, x, log)
			}
		}
		if err := checkHead(path, head, x); err != nil {
			return nil, err
		}
	} else if x.gen > 0 || x.ep.gen > 0 {
		return nil, journalDamaged(path, &JournalDamage{Reason: "the journal header is damaged or missing"})
	}
	checkpoint := 0
	if head, _ := decodeHead(data); head.gen != 0 && head.gen == x.ep.gen {
		checkpoint = int(x.ep.length)
	}
	s := scan(data, checkpoint)
	if s.damage != nil {
		return nil, journalDamaged(path, s.damage)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lease journal: %w", err)
	}
	w := &wal{f: f, head: s.head, legacy: s.legacy, size: int64(s.end), alloc: int64(len(data)), pending: s.pending, stored: x.stored}
	if s.torn != nil {
		log.Warn("lease journal: torn tail (a write the crash cut short, never acknowledged) overwritten with zeros",
			"file", path, "offset", s.end, "bytes", s.tornTo-s.end, "err", s.torn)
		if err := w.zero(int64(s.end), int64(s.tornTo)); err != nil {
			f.Close()
			return nil, err
		}
	}
	return w, nil
}

func recordedBy(x expect) string {
	if x.gen >= x.ep.gen {
		return FileName
	}
	return EpochName
}

func journalDamaged(path string, d *JournalDamage) error {
	d.File = path
	return fmt.Errorf("%w; %s", d, damagedHint)
}

// checkHead compares a journal's header with bbolt and the epoch.
func checkHead(path string, head walHead, x expect) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("open %s: %w: %s; %s", path, ErrDamaged, fmt.Sprintf(format, args...), damagedHint)
	}
	switch {
	case x.gen != 0 && head.gen != x.gen:
		return fail("it is journal %d but %s records journal %d (rolled back or replaced)", head.gen, FileName, x.gen)
	case head.base != x.seq:
		return fail("it follows commit %d but %s holds commit %d (the database was replaced or lost commits)", head.base, FileName, x.seq)
	case x.ep.gen > head.gen:
		return fail("it is journal %d but %s records journal %d (rolled back)", head.gen, EpochName, x.ep.gen)
	}
	return nil
}

// finishFold completes a fold a crash interrupted after bbolt's
// transaction: the next journal (leases.wal.next, of bbolt's generation
// and commit) replaces the folded one. It reports whether it did.
func finishFold(dir string, x expect) (bool, error) {
	if !nextJournalReady(dir, x) {
		return false, nil
	}
	return true, switchJournal(dir)
}

// nextJournalReady reports whether leases.wal.next is the journal bbolt's
// commit expects.
func nextJournalReady(dir string, x expect) bool {
	data, err := os.ReadFile(filepath.Join(dir, nextWALName))
	if err != nil {
		return false
	}
	head, ok := decodeHead(data)
	return ok && head.gen == x.gen && head.base == x.seq
}

// newJournal creates leases.wal (through leases.wal.next) with head.
func newJournal(dir string, head walHead, stored int) (*wal, error) {
	w := &wal{head: head, pending: map[string]*placement.Lease{}, stored: stored, size: walFileHeader}
	f, alloc, err := createJournal(dir, head, w.reserve())
	if err != nil {
		return nil, err
	}
	if err := os.Rename(filepath.Join(dir, nextWALName), filepath.Join(dir, WALName)); err != nil {
		f.Close()
		return nil, fmt.Errorf("create lease journal: %w", err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, fmt.Errorf("create lease journal: %w", err)
	}
	w.f, w.alloc = f, alloc
	return w, nil
}

// createJournal writes leases.wal.next: head, then zeros to whole chunks
// with room for reserve bytes of deletions past the header, synced.
func createJournal(dir string, head walHead, reserve int64) (*os.File, int64, error) {
	path := filepath.Join(dir, nextWALName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("create lease journal: %w", err)
	}
	alloc := (walFileHeader + reserve + walChunk - 1) / walChunk * walChunk
	data := appendHead(make([]byte, 0, alloc), head)
	data = data[:alloc]
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = unix.Fdatasync(int(f.Fd()))
	}
	if err != nil {
		f.Close()
		_ = os.Remove(path)
		return nil, 0, fmt.Errorf("create lease journal: %w", err)
	}
	return f, alloc, nil
}

// zero overwrites [from, to) with zeros in place, durably.
func (w *wal) zero(from, to int64) error {
	if to <= from {
		return nil
	}
	if _, err := w.f.WriteAt(make([]byte, to-from), from); err != nil {
		return fmt.Errorf("zero the torn tail of the lease journal: %w", err)
	}
	if err := unix.Fdatasync(int(w.f.Fd())); err != nil {
		return fmt.Errorf("zero the torn tail of the lease journal: %w", err)
	}
	return nil
}
