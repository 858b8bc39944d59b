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
// with a JSON payload {"put": lease} or {"del": id}. A torn tail (a record
// cut short, or whose CRC does not match, as a crash in mid-write leaves
// it) ends the journal: it is truncated there, with a log line.

// WALName is the journal file inside the state directory.
const WALName = "leases.wal"

const (
	walHeader       = 8
	walMaxRecord    = 1 << 20 // a lease is a few hundred bytes
	walCompactBytes = 8 << 20
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
	var r walRecord
	if err := json.Unmarshal(payload, &r); err != nil || (r.Put == nil) == (r.Del == "") {
		return walRecord{}, 0, fmt.Errorf("%w: bad payload", errTorn)
	}
	return r, walHeader + int(n), nil
}

// appendRecord appends r's encoding to b.
func appendRecord(b []byte, r walRecord) ([]byte, error) {
	payload, err := json.Marshal(r)
	if err != nil {
		return b, fmt.Errorf("encode lease change: %w", err)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(payload, crcTable))
	return append(b, payload...), nil
}

// wal is the open journal. Its owner (DB) serialises calls.
type wal struct {
	f    *os.File
	size int64
	buf  []byte
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
	if _, err := f.Seek(w.size, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("seek lease journal: %w", err)
	}
	return w, nil
}

// replay decodes the journal's records into their net effect; off is the
// end of the valid records and torn, when not nil, why the rest is not.
func replay(data []byte) (pending map[string]*placement.Lease, records, off int, torn error) {
	pending = map[string]*placement.Lease{}
	for {
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
		var err error
		if w.buf, err = appendRecord(w.buf, r); err != nil {
			return err
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return nil
	}
	if _, err := w.f.Write(w.buf); err != nil {
		_ = w.truncate(w.size) // drop a partial write
		return fmt.Errorf("append to lease journal: %w", err)
	}
	if err := unix.Fdatasync(int(w.f.Fd())); err != nil {
		_ = w.truncate(w.size)
		return fmt.Errorf("fdatasync lease journal: %w", err)
	}
	w.size += int64(len(w.buf))
	for _, r := range recs {
		apply(w.pending, r)
	}
	return nil
}

// truncate cuts the journal to size and syncs it.
func (w *wal) truncate(size int64) error {
	if err := w.f.Truncate(size); err != nil {
		return fmt.Errorf("truncate lease journal: %w", err)
	}
	if _, err := w.f.Seek(size, io.SeekStart); err != nil {
		return fmt.Errorf("seek lease journal: %w", err)
	}
	if err := unix.Fdatasync(int(w.f.Fd())); err != nil {
		return fmt.Errorf("fdatasync lease journal: %w", err)
	}
	w.size = size
	return nil
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
	w.f, w.size = f, 0
	clear(w.pending)
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("start a new lease journal: %w", err)
	}
	return nil
}

func (w *wal) close() error { return w.f.Close() }
