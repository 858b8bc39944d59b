package store

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt maps the file and reads its pages from the mapping: a file cut
// shorter than the pages its meta page counts faults (SIGBUS) on the first
// read past the end. checkSize finds that before bbolt opens the file.

const boltMagic = 0xED0CDAED

// checkSize compares the file's size with the page count of its newest
// valid meta page (bbolt's pages 0 and 1: a 16-byte page header, then
// magic, version, page size, flags, root bucket (16), freelist, pgid,
// txid, checksum (FNV-64a of the fields before it)). Files without a valid
// meta page are left to bbolt to refuse.
func checkSize(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // bbolt reports it
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	head := make([]byte, 80)
	if _, err := f.ReadAt(head, 0); err != nil {
		return nil
	}
	pageSize := int64(binary.LittleEndian.Uint32(head[24:]))
	var pgid, txid uint64
	found := false
	for _, off := range []int64{0, pageSize} {
		m := make([]byte, 80)
		if pageSize < 1024 || pageSize > 1<<16 {
			break
		}
		if _, err := f.ReadAt(m, off); err != nil && err != io.EOF {
			continue
		}
		if binary.LittleEndian.Uint32(m[16:]) != boltMagic {
			continue
		}
		h := fnv.New64a()
		_, _ = h.Write(m[16:72])
		if h.Sum64() != binary.LittleEndian.Uint64(m[72:]) {
			continue
		}
		if t := binary.LittleEndian.Uint64(m[64:]); !found || t > txid {
			found, txid, pgid = true, t, binary.LittleEndian.Uint64(m[56:])
		}
	}
	if found && int64(pgid)*pageSize > fi.Size() {
		return fmt.Errorf("open %s: %w: the file is %d bytes but its pages reach %d (cut short); %s",
			path, ErrDamaged, fi.Size(), int64(pgid)*pageSize, damagedHint)
	}
	return nil
}
