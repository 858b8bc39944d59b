package store

import (
	"encoding/binary"
	"fmt"

	"github.com/wsched/wsched/placement"
)

// Reading a journal tells two kinds of damage apart. A torn tail is what a
// crash in mid-write leaves: the last record cut where the disk stopped
// writing, at a sector boundary, and nothing but zeros after it (the file
// was grown with zeros ahead of the records). It was never acknowledged,
// so it is dropped: overwritten with zeros, with a log line. Anything else
// — a record that is complete (its end mark is there) but fails its CRC,
// zeros followed by data, a length that points past the file, a file that
// is not whole chunks, damage before the length wsched.epoch last recorded
// — is corruption: acknowledged records may be lost, so the daemon refuses
// to start, names the file and the offset, and leaves the file as it is
// for `wsched state repair`, which keeps the valid records on both sides.

// sectorSize is the unit a disk writes atomically: a torn write stops at
// a multiple of it.
const sectorSize = 512

// JournalDamage is corruption in a lease journal (not a torn tail).
type JournalDamage struct {
	File string
	// Offset is where the damage starts; Records are the valid records
	// before it and After those found past it (repair keeps both).
	Offset  int
	Records int
	After   int
	Reason  string
}

func (e *JournalDamage) Error() string {
	return fmt.Sprintf("lease journal %s is corrupt at offset %d: %s (%d valid records before it, %d after)",
		e.File, e.Offset, e.Reason, e.Records, e.After)
}

// Unwrap makes a JournalDamage an ErrDamaged.
func (e *JournalDamage) Unwrap() error { return ErrDamaged }

// scanned is what a journal's bytes hold.
type scanned struct {
	head    walHead
	legacy  bool // no header: an earlier version's journal
	pending map[string]*placement.Lease
	records int
	end     int // end of the valid records
	// torn, when not nil, says why the bytes from end to tornTo are a torn
	// tail.
	torn   error
	tornTo int
	damage *JournalDamage
}

// scan reads a journal; checkpoint is the length of valid records
// wsched.epoch recorded for it (0: none), before which nothing is a torn
// tail.
func scan(data []byte, checkpoint int) scanned {
	s := scanned{pending: map[string]*placement.Lease{}}
	if len(data) == 0 {
		return s
	}
	head, ok := decodeHead(data)
	if !ok {
		if string(data[:min(len(data), 8)]) == walMagic[:min(len(data), 8)] || !legacyStart(data) {
			s.damage = &JournalDamage{Reason: "the journal header is damaged"}
			return s
		}
		s.legacy = true
		return scanLegacy(data, s)
	}
	s.head, s.end = head, walFileHeader
	for !allZero(data[s.end:]) {
		r, n, err := decodeRecord(data[s.end:], head.gen)
		if err != nil {
			s.classify(data, checkpoint, err)
			break
		}
		apply(s.pending, r)
		s.records++
		s.end += n
	}
	if s.damage == nil && len(data)%walChunk != 0 {
		s.damage = &JournalDamage{Offset: len(data), Reason: fmt.Sprintf("the file is %d bytes, not whole %d-byte chunks (cut short?)", len(data), walChunk)}
	}
	if s.damage == nil && s.torn == nil && s.end < checkpoint {
		s.damage = &JournalDamage{Offset: s.end, Reason: fmt.Sprintf("the records end before offset %d, where %s last recorded their end (cut short or rolled back)", checkpoint, EpochName)}
	}
	if s.damage != nil {
		s.damage.Records = s.records
	}
	return s
}

// legacyStart reports whether data starts like a journal of an earlier
// version: a plausible record length, or zeros.
func legacyStart(data []byte) bool {
	if len(data) < 4 {
		return allZero(data)
	}
	n := binary.LittleEndian.Uint32(data)
	return n <= walMaxRecord
}

// classify decides whether the bad record at s.end starts a torn tail.
func (s *scanned) classify(data []byte, checkpoint int, why error) {
	off := s.end
	z := len(data)
	for z > off && data[z-1] == 0 {
		z--
	}
	damage := func(reason string) {
		s.damage = &JournalDamage{Offset: off, Reason: reason, After: len(resync(data, off+1, s.head.gen))}
	}
	if off < checkpoint {
		damage(fmt.Sprintf("%v, before offset %d that %s recorded as written", why, checkpoint, EpochName))
		return
	}
	if len(data)-off < walHeader {
		damage(fmt.Sprintf("%v", why))
		return
	}
	n := int(binary.LittleEndian.Uint32(data[off:]))
	recEnd := off + walHeader + n + 1
	switch {
	case n == 0 || n > walMaxRecord:
		damage(fmt.Sprintf("record length %d, with data up to offset %d", n, z))
	case recEnd > len(data):
		damage(fmt.Sprintf("record of %d bytes runs past the end of the file", n))
	case z >= recEnd:
		damage(fmt.Sprintf("%v in a complete record", why))
	case (z+sectorSize-1)/sectorSize*sectorSize >= recEnd:
		damage(fmt.Sprintf("%v: the record's last bytes are zeros, but not from a sector boundary on", why))
	case lengthDamaged(data[off:z], s.head.gen):
		damage("the record's length field is damaged")
	default:
		s.torn, s.tornTo = why, z
	}
}

// lengthDamaged reports whether rec (a record with its trailing zeros cut
// off) is a complete record whose length field alone is wrong.
func lengthDamaged(rec []byte, gen uint64) bool {
	if len(rec) < walHeader+2 || rec[len(rec)-1] != walEnd {
		return false
	}
	payload := rec[walHeader : len(rec)-1]
	return recordSum(gen, payload) == binary.LittleEndian.Uint32(rec[4:])
}

// resync returns the valid records of generation gen found at or after
// from, skipping whatever does not decode (repair keeps them).
func resync(data []byte, from int, gen uint64) []walRecord {
	var out []walRecord
	for off := from; off+walHeader < len(data); {
		if data[off] == 0 && allZero(data[off:min(len(data), off+walHeader)]) {
			off++
			continue
		}
		r, n, err := decodeRecord(data[off:], gen)
		if err != nil {
			off++
			continue
		}
		out = append(out, r)
		off += n
	}
	return out
}

// scanLegacy reads a journal of an earlier version. A bad record with
// valid records after it is corruption; one with none after it, the torn
// tail the earlier version would have truncated.
func scanLegacy(data []byte, s scanned) scanned {
	for !allZero(data[s.end:]) {
		r, n, err := decodeLegacyRecord(data[s.end:])
		if err != nil {
			after := 0
			for off := s.end + 1; off+walHeader < len(data); off++ {
				if _, _, err := decodeLegacyRecord(data[off:]); err == nil {
					after++
				}
			}
			if after > 0 {
				s.damage = &JournalDamage{Offset: s.end, Records: s.records, After: after, Reason: err.Error()}
				return s
			}
			s.torn, s.tornTo = err, len(data)
			return s
		}
		apply(s.pending, r)
		s.records++
		s.end += n
	}
	return s
}

// salvageJournal returns the net effect of every valid record in data, on
// both sides of any damage, and how many there were (`wsched state
// repair`). gens are generations the journal may have, tried when its
// header is damaged.
func salvageJournal(data []byte, gens ...uint64) (map[string]*placement.Lease, int) {
	s := scan(data, 0)
	if s.legacy || s.damage == nil {
		return s.pending, s.records
	}
	if _, ok := decodeHead(data); !ok {
		best := s.pending
		n := 0
		for _, gen := range gens {
			rs := resync(data, walFileHeader, gen)
			if len(rs) > n {
				best, n = map[string]*placement.Lease{}, len(rs)
				for _, r := range rs {
					apply(best, r)
				}
			}
		}
		return best, n
	}
	n := s.records
	for _, r := range resync(data, s.damage.Offset+1, s.head.gen) {
		apply(s.pending, r)
		n++
	}
	return s.pending, n
}
