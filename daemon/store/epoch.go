package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"
)

// The commit epoch detects a database that went back in time. Every fold
// of the lease journal into bbolt (compact) bumps a sequence number, kept
// both inside bbolt (in the fold's own transaction) and in EpochName next
// to it (written after the transaction, atomically by rename). bbolt reads
// the newest meta page that validates, so a damaged meta page silently
// returns the previous commit, and a 0-byte file starts empty: in both
// cases bbolt's sequence is lower than the side file's, and Open refuses
// with ErrDamaged instead of granting the lost leases' bytes again. A
// crash between the transaction and the rename leaves bbolt one ahead,
// which is harmless: Open rewrites the side file.

// EpochName is the side file inside the state directory.
const EpochName = "wsched.epoch"

// ErrDamaged means the state database is damaged or older than its last
// acknowledged commit; `wsched state check` and `wsched state repair` deal
// with it.
var ErrDamaged = errors.New("state database is damaged")

// damagedHint is appended to every ErrDamaged message.
const damagedHint = "refusing to start so that no acknowledged lease is forgotten and its bytes granted twice; " +
	"stop the daemon, run 'wsched state check', then 'wsched state repair'"

var (
	bucketMeta = []byte("meta")
	keySeq     = []byte("seq")
	// keyJournal is the generation of the journal that follows bbolt's
	// commit (wal.go).
	keyJournal = []byte("journal")
)

// epoch is what EpochName records: bbolt's commit sequence, the journal
// generation that follows it, and how far that journal's records reached
// when it was last written (Open refuses a journal that ends before).
type epoch struct {
	seq, gen uint64
	length   int64
	found    bool // the file exists
}

// newer reports whether e records more than o (a later journal, or more
// of the same one).
func (e epoch) newer(o epoch) bool {
	return e.seq > o.seq || e.seq == o.seq && (e.gen > o.gen || e.gen == o.gen && e.length > o.length)
}

func (e epoch) text() string {
	body := fmt.Sprintf("seq %d\njournal %d\nlength %d\n", e.seq, e.gen, e.length)
	return body + fmt.Sprintf("crc %08x\n", crc32.Checksum([]byte(body), crcTable))
}

// readEpoch reads the side file; found is false when it does not exist.
// The file of earlier versions has the "seq" line alone.
func readEpoch(dir string) (epoch, error) {
	path := filepath.Join(dir, EpochName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return epoch{}, nil
	}
	if err != nil {
		return epoch{}, fmt.Errorf("read %s: %w", path, err)
	}
	e, err := parseEpoch(string(data))
	if err != nil {
		return epoch{}, fmt.Errorf("read %s: %w: %w; %s", path, ErrDamaged, err, damagedHint)
	}
	e.found = true
	return e, nil
}

func parseEpoch(text string) (epoch, error) {
	var e epoch
	lines := strings.SplitAfter(text, "\n")
	if len(lines) == 2 && lines[1] == "" { // an earlier version's "seq N"
		f := strings.Fields(lines[0])
		if len(f) != 2 || f[0] != "seq" {
			return e, fmt.Errorf("malformed %q", text)
		}
		var err error
		e.seq, err = strconv.ParseUint(f[1], 10, 64)
		return e, err
	}
	if len(lines) != 5 || lines[4] != "" {
		return e, fmt.Errorf("malformed %q", text)
	}
	var sum uint32
	n, err := fmt.Sscanf(strings.Join(lines[:4], ""), "seq %d\njournal %d\nlength %d\ncrc %x\n", &e.seq, &e.gen, &e.length, &sum)
	if err != nil || n != 4 {
		return e, fmt.Errorf("malformed %q", text)
	}
	if crc32.Checksum([]byte(strings.Join(lines[:3], "")), crcTable) != sum {
		return e, fmt.Errorf("checksum mismatch in %q", text)
	}
	return e, nil
}

// writeEpoch replaces the side file atomically and durably: a temporary
// file, fsync, rename, fsync of the directory.
func writeEpoch(dir string, e epoch) error {
	path := filepath.Join(dir, EpochName)
	tmp := path + ".tmp"
	err := writeSynced(tmp, []byte(e.text()))
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// boltSeq reads the sequence recorded in bbolt (0 before the first fold).
func boltSeq(tx *bolt.Tx) uint64 { return metaUint(tx, keySeq) }

// boltGen reads the journal generation recorded in bbolt (0: none, an
// earlier version's state or a new database).
func boltGen(tx *bolt.Tx) uint64 { return metaUint(tx, keyJournal) }

func metaUint(tx *bolt.Tx, key []byte) uint64 {
	b := tx.Bucket(bucketMeta)
	if b == nil {
		return 0
	}
	v := b.Get(key)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// putBoltSeq records seq in bbolt, in tx.
func putBoltSeq(tx *bolt.Tx, seq uint64) error { return putMetaUint(tx, keySeq, seq) }

// putBoltGen records the journal generation in bbolt, in tx.
func putBoltGen(tx *bolt.Tx, gen uint64) error { return putMetaUint(tx, keyJournal, gen) }

func putMetaUint(tx *bolt.Tx, key []byte, v uint64) error {
	b, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	return b.Put(key, binary.BigEndian.AppendUint64(nil, v))
}

// guard runs fn and turns a panic (bbolt panics on some damaged pages) or
// a memory fault (a page past the end of a cut-short file: SIGBUS in the
// mapping) into an ErrDamaged error; callers name the file. It covers the
// calling goroutine only.
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: bbolt failed reading it: %v; %s", ErrDamaged, r, damagedHint)
		}
	}()
	return fn()
}

// checkEpoch compares the database file with the side file before bbolt
// opens it (bbolt would turn a 0-byte file into an empty database).
func checkEpoch(path string, epoch uint64) error {
	if epoch == 0 {
		return nil
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("open %s: %w: the file is missing but %s records commit %d; %s", path, ErrDamaged, EpochName, epoch, damagedHint)
	case err != nil:
		return fmt.Errorf("open %s: %w", path, err)
	case fi.Size() == 0:
		return fmt.Errorf("open %s: %w: the file is empty (0 bytes) but %s records commit %d; %s", path, ErrDamaged, EpochName, epoch, damagedHint)
	}
	return nil
}

// rolledBack is the error for a database older than the side file.
func rolledBack(path string, seq, epoch uint64) error {
	return fmt.Errorf("open %s: %w: it holds commit %d but %s records commit %d "+
		"(bbolt fell back to an older commit, likely a damaged meta page; acknowledged leases may be missing); %s",
		path, ErrDamaged, seq, EpochName, epoch, damagedHint)
}

// damaged marks bbolt's own corruption errors (invalid or checksum-failed
// meta pages, wrong version, a file too small for its pages) as
// ErrDamaged, with the hint. Errors of the file system (permission, I/O)
// and a lock held elsewhere stay as they are.
func damaged(err error) error {
	var pathErr *fs.PathError
	var errno syscall.Errno
	if errors.Is(err, ErrDamaged) || errors.Is(err, ErrLocked) || errors.Is(err, bolterrors.ErrTimeout) ||
		errors.As(err, &pathErr) || errors.As(err, &errno) {
		return err
	}
	return fmt.Errorf("%w: %w; %s", ErrDamaged, err, damagedHint)
}

// openBolt opens path with opts, turning a panic into ErrDamaged. bbolt
// panics while it holds the file lock (reading a damaged freelist); the
// lock is released here then (the leaked mapping would keep it).
func openBolt(path string, opts bolt.Options) (*bolt.DB, error) {
	var f *os.File
	opts.OpenFile = func(name string, flag int, mode os.FileMode) (*os.File, error) {
		var err error
		f, err = os.OpenFile(name, flag, mode)
		return f, err
	}
	var db *bolt.DB
	err := guard(func() (err error) {
		db, err = bolt.Open(path, 0o600, &opts)
		return err
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w", path, ErrLocked)
	}
	if err != nil {
		if db == nil && f != nil { // its mapping keeps the file open: unlock it
			_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
			_ = f.Close()
		}
		return nil, fmt.Errorf("open %s: %w", path, damaged(err))
	}
	return db, nil
}
