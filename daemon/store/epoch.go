package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
)

// readEpoch returns the side file's sequence, 0 when it does not exist.
func readEpoch(dir string) (uint64, error) {
	path := filepath.Join(dir, EpochName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	f := strings.Fields(string(data))
	if len(f) != 2 || f[0] != "seq" {
		return 0, fmt.Errorf("read %s: %w: malformed %q", path, ErrDamaged, data)
	}
	seq, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w: %w", path, ErrDamaged, err)
	}
	return seq, nil
}

// writeEpoch replaces the side file atomically and durably: a temporary
// file, fsync, rename, fsync of the directory.
func writeEpoch(dir string, seq uint64) error {
	path := filepath.Join(dir, EpochName)
	tmp := path + ".tmp"
	err := writeSynced(tmp, []byte("seq "+strconv.FormatUint(seq, 10)+"\n"))
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
func boltSeq(tx *bolt.Tx) uint64 {
	b := tx.Bucket(bucketMeta)
	if b == nil {
		return 0
	}
	v := b.Get(keySeq)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// putBoltSeq records seq in bbolt, in tx.
func putBoltSeq(tx *bolt.Tx, seq uint64) error {
	b, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	return b.Put(keySeq, binary.BigEndian.AppendUint64(nil, seq))
}

// guard runs fn and turns a panic (bbolt panics on some damaged pages)
// into an ErrDamaged error; callers name the file.
func guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: bbolt panicked reading it: %v; %s", ErrDamaged, r, damagedHint)
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
// meta pages, wrong version) as ErrDamaged, with the hint.
func damaged(err error) error {
	if errors.Is(err, ErrDamaged) {
		return err
	}
	if errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrChecksum) ||
		errors.Is(err, bolterrors.ErrVersionMismatch) {
		return fmt.Errorf("%w: %w; %s", ErrDamaged, err, damagedHint)
	}
	return err
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
