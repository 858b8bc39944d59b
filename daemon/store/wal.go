package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"

	"golang.org/x/sys/unix"

	"github.com/wsched/wsched/placement"
)

// The lease journal (in the style of etcd's WAL): lease changes are
// appended to leases.wal as records and made durable with one fdatasync per
// group commit, where a bbolt transaction costs two. Every walCompactBytes
// the changes are written into bbolt in one transaction and a new journal
// starts; recovery is bbolt's leases with the journal replayed over them.
//
// The file starts with a header (walFileHeader bytes):
//
//	"WSCHEDJ2" | generation uint64 | base commit uint64 | CRC-32C of the 24 bytes before it uint32 | 4 zero bytes
//
// The generation numbers the journals of a state directory (each fold
// starts the next one); bbolt's meta bucket and wsched.epoch record the
// generation that follows their commit, and the base commit is the bbolt
// commit sequence the journal is replayed over, so a journal that is
// missing, emptied, of another generation or over another commit is found
// (walopen.go). A record is
//
//	length uint32 | CRC-32C of generation, length and payload uint32 | payload | walEnd
//
// (integers little endian) with a payload of walPut and the lease's stored
// form (leasecodec.go), or walDel and the lease ID. The trailing walEnd
// byte (never zero) tells a record that is complete but damaged from one
// whose end was never written.
//
// The file is grown ahead of the records by walChunk of zeros at a time
// (as etcd preallocates its segments): a commit then overwrites blocks the
// file already has, and its fdatasync flushes data only — no file size or
// extent change for the filesystem to journal (on ext4 a third less time
// and CPU per commit than appending; see BenchmarkJournalCommit). Zeros
// where the next record's header would be are the journal's clean end. The
// zeros also keep room for a deletion of every stored lease (walReserve),
// so that on a full disk releases are still written (grants fail first).
//
// Journals of earlier versions (no header; records without walEnd, the
// CRC over the payload only, payloads also in JSON) are still read, and
// folded into bbolt at once (walopen.go).

// WALName is the journal file inside the state directory.
const WALName = "leases.wal"

// nextWALName is the next journal, created (with its header, synced)
// before the fold that it follows.
const nextWALName = WALName + ".next"

const (
	walMagic      = "WSCHEDJ2"
	walFileHeader = 32
	walHeader     = 8
	walMaxRecord  = 1 << 20 // a lease is a few hundred bytes
	walEnd        = 0xE5
	walChunk      = 1 << 20 // zeros the file grows by ahead of the records
	// walDelReserve is the room kept per stored lease for its deletion
	// record (a lease ID of up to 32 bytes).
	walDelReserve = walHeader + 1 + 32 + 1
)

var walCompactBytes int64 = 8 << 20

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

// walHead is a journal's header.
type walHead struct {
	gen, base uint64
}

func appendHead(b []byte, h walHead) []byte {
	at := len(b)
	b = append(b, walMagic...)
	b = binary.LittleEndian.AppendUint64(b, h.gen)
	b = binary.LittleEndian.AppendUint64(b, h.base)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[at:], crcTable))
	return append(b, 0, 0, 0, 0)
}

// decodeHead reads a journal's header; ok is false when data does not
// start with one (a journal of an earlier version, or a damaged header).
func decodeHead(data []byte) (h walHead, ok bool) {
	if len(data) < walFileHeader || string(data[:8]) != walMagic {
		return h, false
	}
	if crc32.Checksum(data[:24], crcTable) != binary.LittleEndian.Uint32(data[24:]) {
		return h, false
	}
	return walHead{gen: binary.LittleEndian.Uint64(data[8:]), base: binary.LittleEndian.Uint64(data[16:])}, true
}

// recordSum is a record's CRC: of the generation, the length and the
// payload.
func recordSum(gen uint64, payload []byte) uint32 {
	var pre [12]byte
	binary.LittleEndian.PutUint64(pre[:], gen)
	binary.LittleEndian.PutUint32(pre[8:], uint32(len(payload)))
	return crc32.Update(crc32.Checksum(pre[:], crcTable), crcTable, payload)
}

// errRecord is a record that does not decode.
var errRecord = errors.New("bad record")

// decodeRecord reads the record of journal generation gen at the start of
// b and returns it with its size, or errRecord.
func decodeRecord(b []byte, gen uint64) (walRecord, int, error) {
	if len(b) < walHeader {
		return walRecord{}, 0, fmt.Errorf("%w: %d-byte header", errRecord, len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	if n == 0 || n > walMaxRecord || int(n) > len(b)-walHeader-1 {
		return walRecord{}, 0, fmt.Errorf("%w: length %d with %d bytes left", errRecord, n, len(b)-walHeader)
	}
	payload := b[walHeader : walHeader+int(n)]
	if b[walHeader+int(n)] != walEnd {
		return walRecord{}, 0, fmt.Errorf("%w: no end mark", errRecord)
	}
	if recordSum(gen, payload) != binary.LittleEndian.Uint32(b[4:]) {
		return walRecord{}, 0, fmt.Errorf("%w: CRC mismatch", errRecord)
	}
	r, err := decodePayload(payload)
	if err != nil {
		return walRecord{}, 0, fmt.Errorf("%w: bad payload: %w", errRecord, err)
	}
	return r, walHeader + int(n) + 1, nil
}

// decodeLegacyRecord reads a record of a journal of an earlier version:
// no end mark, the CRC over the payload only.
func decodeLegacyRecord(b []byte) (walRecord, int, error) {
	if len(b) < walHeader {
		return walRecord{}, 0, fmt.Errorf("%w: %d-byte header", errRecord, len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	if n == 0 || n > walMaxRecord || int(n) > len(b)-walHeader {
		return walRecord{}, 0, fmt.Errorf("%w: length %d with %d bytes left", errRecord, n, len(b)-walHeader)
	}
	payload := b[walHeader : walHeader+int(n)]
	if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
		return walRecord{}, 0, fmt.Errorf("%w: CRC mismatch", errRecord)
	}
	r, err := decodePayload(payload)
	if err != nil {
		return walRecord{}, 0, fmt.Errorf("%w: bad payload: %w", errRecord, err)
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

// appendRecord appends r's encoding for journal generation gen to b.
func appendRecord(b []byte, gen uint64, r walRecord) []byte {
	at := len(b)
	b = append(b, make([]byte, walHeader)...)
	if r.Put != nil {
		b = encodeLease(append(b, walPut), r.Put)
	} else {
		b = append(append(b, walDel), r.Del...)
	}
	payload := b[at+walHeader:]
	binary.LittleEndian.PutUint32(b[at:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[at+4:], recordSum(gen, payload))
	return append(b, walEnd)
}

// wal is the open journal. Its owner (DB) serialises calls.
type wal struct {
	f      *os.File
	head   walHead
	legacy bool  // an earlier version's journal (folded at once)
	size   int64 // end of the records
	alloc  int64 // file size: zeros from size to alloc
	// noFsync skips the commit's fdatasync (DB.SetUnsafeNoFsync).
	noFsync bool
	// broken, once set, fails every append: a failed write could not be
	// undone, and what the file holds is not known.
	broken error
	buf    []byte
	// pending is the net effect of the journal since the last compaction:
	// lease ID → lease, or nil when deleted.
	pending map[string]*placement.Lease
	// stored counts the leases bbolt holds (walReserve).
	stored int
}

// reserve is the room kept past the records for deleting every lease.
func (w *wal) reserve() int64 {
	return int64(w.stored+len(w.pending)) * walDelReserve
}

func apply(pending map[string]*placement.Lease, r walRecord) {
	if r.Put != nil {
		pending[r.Put.ID] = r.Put
		return
	}
	pending[r.Del] = nil
}

// append writes changes as records and makes them durable with one
// fdatasync. A batch that grants needs the deletion reserve behind it; a
// batch of deletions only may use the reserve.
func (w *wal) append(changes []placement.Change) error {
	if w.broken != nil {
		return fmt.Errorf("lease journal unusable after a failed write: %w", w.broken)
	}
	w.buf = w.buf[:0]
	var recs []walRecord
	puts := 0
	for _, c := range changes {
		var r walRecord
		switch {
		case c.Put != nil:
			l := *c.Put
			r.Put = &l
			puts++
		case c.Delete != "":
			r.Del = c.Delete
		default:
			continue
		}
		w.buf = appendRecord(w.buf, w.head.gen, r)
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return nil
	}
	need := int64(len(w.buf))
	if puts > 0 {
		need += w.reserve() + int64(puts)*walDelReserve
	}
	if err := w.grow(need); err != nil && (puts > 0 || w.size+int64(len(w.buf)) > w.alloc) {
		return err
	}
	if _, err := w.f.WriteAt(w.buf, w.size); err != nil {
		return w.undo(fmt.Errorf("append to lease journal: %w", err))
	}
	if err := w.sync(); err != nil {
		return w.undo(fmt.Errorf("fdatasync lease journal: %w", err))
	}
	w.size += int64(len(w.buf))
	for _, r := range recs {
		apply(w.pending, r)
	}
	return nil
}

// undo overwrites what a failed append may have written with zeros (in
// place: no space is needed) so that it is not replayed; when that fails
// too the journal is unusable.
func (w *wal) undo(err error) error {
	end := min(w.size+int64(len(w.buf)), w.alloc)
	if end > w.size {
		_, zerr := w.f.WriteAt(make([]byte, end-w.size), w.size)
		if zerr == nil {
			zerr = unix.Fdatasync(int(w.f.Fd()))
		}
		if zerr != nil {
			w.broken = errors.Join(err, zerr)
		}
	}
	return err
}

func (w *wal) sync() error {
	if w.noFsync {
		return nil
	}
	return unix.Fdatasync(int(w.f.Fd()))
}

// grow makes sure n more bytes fit in the file past the records, writing
// zeros past its end a walChunk at a time (their fdatasync is the next
// commit's).
func (w *wal) grow(n int64) error {
	if w.size+n <= w.alloc {
		return nil
	}
	to := (w.size + n + walChunk - 1) / walChunk * walChunk
	if _, err := w.f.WriteAt(make([]byte, to-w.alloc), w.alloc); err != nil {
		if fi, serr := w.f.Stat(); serr == nil && fi.Size() > w.alloc {
			w.alloc = fi.Size() // the zeros that were written stay usable
		}
		return fmt.Errorf("grow lease journal: %w", err)
	}
	w.alloc = to
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

func (w *wal) close() error { return w.f.Close() }
