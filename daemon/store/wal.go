package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/wsched/wsched/placement"
)

// The lease journal (in the style of etcd's WAL): lease changes are
// appended to leases.wal as records and made durable with one fdatasync per
// group commit, where a bbolt transaction costs two. Every walCompactBytes
// the changes are written into bbolt in one transaction and the journal
// starts over; recovery is bbolt's leases with the journal replayed over
// them. A record is
//
//	length uint32 (little endian) | CRC-32C of the payload uint32 | payload
//
// with a payload of walPut and the lease's stored form (leasecodec.go), or
// walDel and the lease ID; journals of earlier versions have JSON payloads
// {"put": lease} or {"del": id}, still read. A torn tail (a record
// cut short, or whose CRC does not match, as a crash in mid-write leaves
// it) ends the journal: it is truncated there, with a log line.
//
// The file is grown ahead of the records by walChunk of zeros at a time
// (as etcd preallocates its segments): a commit then overwrites blocks the
// file already has, and its fdatasync flushes data only — no file size or
// extent change for the filesystem to journal (on ext4 a third less time
// and CPU per commit than appending; see BenchmarkJournalCommit). Zeros
// where the next record's header would be are the journal's clean end.

// WALName is the journal file inside the state directory.
const WALName = "leases.wal"

const (
	walHeader       = 8
	walMaxRecord    = 1 << 20 // a lease is a few hundred bytes
	walCompactBytes = 8 << 20
	walChunk        = 1 << 20 // zeros the file grows by ahead of the records
)

// The first byte of a binary payload.
const (
	walPut = 'P'
	walDel = 'D'
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// walRecord is one lease change.
type walRecord struct {
	Put *placement.Lease `json:"put,omitempty"`
	Del string           `json:"del,omitempty"`
}

// errTorn marks the end of the valid records.
var errTorn = errors.New("torn record")

// decodeRecord reads the record at the start of b and returns it with its
// size, io.EOF at the clean end, or errTorn.
func decodeRecord(b []byte) (walRecord, int, error) {
	if len(b) == 0 {
		return walRecord{}, 0, io.EOF
	}
	if len(b) < walHeader {
		return walRecord{}, 0, fmt.Errorf("%w: %d-byte header", errTorn, len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	sum := binary.LittleEndian.Uint32(b[4:])
	if n == 0 || n > walMaxRecord || int(n) > len(b)-walHeader {
		return walRecord{}, 0, fmt.Errorf("%w: length %d with %d bytes left", errTorn, n, len(b)-walHeader)
	}
	payload := b[walHeader : walHeader+int(n)]
	if crc32.Checksum(payload, crcTable) != sum {
		return walRecord{}, 0, fmt.Errorf("%w: CRC mismatch", errTorn)
	}
	r, err := decodePayload(payload)
	if err != nil {
		return walRecord{}, 0, fmt.Errorf("%w: bad payload: %w", errTorn, err)
	}
	return r, walHeader + int(n), nil
}

// decodePayload reads a record's payload: walPut and a stored lease,
// walDel and an ID, or the JSON of earlier versions.
func decodePayload(p []byte) (walRecord, error) {
	var r walRecord
	switch p[0] {
	case walPut:
		r.Put = new(placement.Lease)
		if err := decodeLease(p[1:], r.Put); err != nil {
			return r, err
		}
		if r.Put.ID == "" {
			return r, fmt.Errorf("%w: lease without ID", errLeaseCodec)
		}
	case walDel:
		r.Del = string(p[1:])
	case '{':
		if err := json.Unmarshal(p, &r); err != nil {
			return r, err
		}
	}
	if (r.Put == nil) == (r.Del == "") {
		return r, errors.New("neither put nor del")
	}
	return r, nil
}

// appendRecord appends r's encoding to b.
func appendRecord(b []byte, r walRecord) []byte {
	at := len(b)
	b = append(b, make([]byte, walHeader)...)
	if r.Put != nil {
		b = encodeLease(append(b, walPut), r.Put)
	} else {
		b = append(append(b, walDel), r.Del...)
	}
	payload := b[at+walHeader:]
	binary.LittleEndian.PutUint32(b[at:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[at+4:], crc32.Checksum(payload, crcTable))
	return b
}

// wal is the open journal. Its owner (DB) serialises calls.
type wal struct {
	f     *os.File
	size  int64 // end of the records
	alloc int64 // file size: zeros from size to alloc
	// noFsync skips the commit's fdatasync (DB.SetUnsafeNoFsync).
	noFsync bool
	buf     []byte
	// pending is the net effect of the journal since the last compaction:
	// lease ID → lease, or nil when deleted.
	pending map[string]*placement.Lease
}

// openWAL opens path, replays its records into pending and truncates a
// torn tail.
func openWAL(path string, log *slog.Logger) (*wal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lease journal: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read lease journal: %w", err)
	}
	w := &wal{f: f}
	var off int
	var torn error
	w.pending, _, off, torn = replay(data)
	if torn != nil {
		log.Warn("lease journal: torn tail truncated", "file", path, "offset", off, "dropped_bytes", len(data)-off, "err", torn)
		if err := w.truncate(int64(off)); err != nil {
			f.Close()
			return nil, err
		}
	}
	w.size = int64(off)
	if torn == nil {
		w.alloc = int64(len(data)) // the zeros past the records stay
	}
	return w, nil
}

// replay decodes the journal's records into their net effect; off is the
// end of the valid records and torn, when not nil, why the rest is not.
func replay(data []byte) (pending map[string]*placement.Lease, records, off int, torn error) {
	pending = map[string]*placement.Lease{}
	for {
		if allZero(data[off:]) { // the end, or the zeros the file was grown by
			return pending, records, off, nil
		}
		r, n, err := decodeRecord(data[off:])
		if errors.Is(err, io.EOF) {
			return pending, records, off, nil
		}
		if err != nil {
			return pending, records, off, err
		}
		apply(pending, r)
		records++
		off += n
	}
}

func apply(pending map[string]*placement.Lease, r walRecord) {
	if r.Put != nil {
		pending[r.Put.ID] = r.Put
		return
	}
	pending[r.Del] = nil
}

// append writes changes as records and makes them durable with one
// fdatasync.
func (w *wal) append(changes []placement.Change) error {
	w.buf = w.buf[:0]
	var recs []walRecord
	for _, c := range changes {
		var r walRecord
		switch {
		case c.Put != nil:
			l := *c.Put
			r.Put = &l
		case c.Delete != "":
			r.Del = c.Delete
		default:
			continue
		}
		w.buf = appendRecord(w.buf, r)
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return nil
	}
	if err := w.grow(int64(len(w.buf))); err != nil {
		_ = w.truncate(w.size)
		return err
	}
	if _, err := w.f.WriteAt(w.buf, w.size); err != nil {
		_ = w.truncate(w.size) // drop a partial write
		return fmt.Errorf("append to lease journal: %w", err)
	}
	if err := w.sync(); err != nil {
		_ = w.truncate(w.size)
		return fmt.Errorf("fdatasync lease journal: %w", err)
	}
	w.size += int64(len(w.buf))
	for _, r := range recs {
		apply(w.pending, r)
	}
	return nil
}

func (w *wal) sync() error {
	if w.noFsync {
		return nil
	}
	return unix.Fdatasync(int(w.f.Fd()))
}

// grow makes sure n more bytes of records fit in the file, writing zeros
// past its end a walChunk at a time (their fdatasync is the next commit's).
func (w *wal) grow(n int64) error {
	if w.size+n <= w.alloc {
		return nil
	}
	to := (w.size + n + walChunk - 1) / walChunk * walChunk
	if _, err := w.f.WriteAt(make([]byte, to-w.alloc), w.alloc); err != nil {
		return fmt.Errorf("grow lease journal: %w", err)
	}
	w.alloc = to
	return nil
}

// truncate cuts the journal to size and syncs it.
func (w *wal) truncate(size int64) error {
	if err := w.f.Truncate(size); err != nil {
		return fmt.Errorf("truncate lease journal: %w", err)
	}
	if err := unix.Fdatasync(int(w.f.Fd())); err != nil {
		return fmt.Errorf("fdatasync lease journal: %w", err)
	}
	w.size, w.alloc = size, size
	return nil
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// PrevWALName is the journal most recently folded into bbolt, kept until
// the next fold: if bbolt loses that fold (a damaged meta page), `wsched
// state repair` replays it over the commit bbolt fell back to.
const PrevWALName = WALName + ".prev"

// reset starts a new journal once the changes are in bbolt; the folded
// one becomes PrevWALName.
func (w *wal) reset() error {
	dir := filepath.Dir(w.f.Name())
	if err := os.Rename(w.f.Name(), filepath.Join(dir, PrevWALName)); err != nil {
		return fmt.Errorf("keep the folded lease journal: %w", err)
	}
	f, err := os.OpenFile(w.f.Name(), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("start a new lease journal: %w", err)
	}
	_ = w.f.Close()
	w.f, w.size, w.alloc = f, 0, 0
	clear(w.pending)
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("start a new lease journal: %w", err)
	}
	return nil
}

func (w *wal) close() error { return w.f.Close() }
