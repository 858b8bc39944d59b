package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wsched/wsched/placement"
)

// Report is what `wsched state check` finds in a state directory.
type Report struct {
	Dir string `json:"dir"`
	// Seq is the commit sequence bbolt holds, Epoch what the side file
	// records.
	Seq   uint64 `json:"seq"`
	Epoch uint64 `json:"epoch"`
	// Leases are bbolt's leases with the journal replayed over them.
	Leases         []placement.Lease `json:"leases"`
	JournalRecords int               `json:"journal_records"`
	// Problems make the check fail; Notes do not.
	Problems []string `json:"problems,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// Check reads the state in dir without changing it. It fails with
// ErrLocked while a daemon holds the database; everything else it finds
// is in the report.
func Check(dir string) (Report, error) {
	r := Report{Dir: dir}
	path := filepath.Join(dir, FileName)
	ep, err := readEpoch(dir)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	r.Epoch = ep.seq
	if err := checkEpoch(path, ep.seq); err != nil {
		r.Problems = append(r.Problems, err.Error())
		pending, _ := checkJournal(dir, expect{ep: ep, seq: ep.seq}, &r)
		r.Leases = overlay(nil, pending)
		return r, nil
	}
	x := expect{ep: ep}
	stored, err := readBolt(path, &r, &x)
	if errors.Is(err, ErrLocked) {
		return r, err
	}
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	pending, _ := checkJournal(dir, x, &r)
	r.Leases = overlay(stored, pending)
	r.Notes = append(r.Notes, Overcommitted(r.Leases)...)
	return r, nil
}

// readBolt opens path read-only, checks its pages and reads its leases,
// sequence and journal generation into r and x.
func readBolt(path string, r *Report, x *expect) ([]placement.Lease, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err := checkSize(path); err != nil {
		return nil, err
	}
	var stored []placement.Lease
	db, err := openBolt(path, bolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("%w (stop it first)", err)
	}
	if err != nil {
		return nil, err
	}
	defer db.Close()
	err = guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			r.Seq, x.seq, x.gen = boltSeq(tx), boltSeq(tx), boltGen(tx)
			for err := range tx.Check() {
				return fmt.Errorf("%w: page check: %w", ErrDamaged, err)
			}
			f := tx.Bucket(bucketMeta).Get(formatKey)
			decode := decodeStored
			if len(f) != 1 || f[0] != leaseV2 { // an earlier version's: rewritten at the next start
				decode = func(_, v []byte, l *placement.Lease) error { return decodeLease(v, l) }
			}
			stored, err = list(db, bucketLeases, decode)
			return err
		})
	})
	if err != nil {
		return stored, fmt.Errorf("read %s: %w", path, err)
	}
	if r.Seq < r.Epoch {
		return stored, rolledBack(path, r.Seq, r.Epoch)
	}
	return stored, nil
}

// checkJournal reads leases.wal as Open would, without changing it, and
// reports what Open would refuse as problems and a torn tail as a note.
func checkJournal(dir string, x expect, r *Report) (map[string]*placement.Lease, error) {
	path := filepath.Join(dir, WALName)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		r.Problems = append(r.Problems, fmt.Sprintf("read %s: %v", path, err))
		return nil, err
	}
	if recorded := max(x.gen, x.ep.gen); len(data) == 0 && recorded > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%s: the lease journal is missing or empty but %s records journal %d: "+
			"the leases granted since the last fold are lost", path, recordedBy(x), recorded))
		return nil, nil
	}
	head, ok := decodeHead(data)
	if ok && !(x.gen > 0 && head.gen+1 == x.gen && nextJournalReady(dir, x)) { // else a fold the next start finishes
		if err := checkHead(path, head, x); err != nil {
			r.Problems = append(r.Problems, err.Error())
		}
	}
	checkpoint := 0
	if ok && head.gen == x.ep.gen {
		checkpoint = int(x.ep.length)
	}
	s := scan(data, checkpoint)
	r.JournalRecords = s.records
	switch {
	case s.damage != nil:
		s.damage.File = path
		r.Problems = append(r.Problems, s.damage.Error()+"; 'wsched state repair' keeps the valid records on both sides")
		pending, n := salvageJournal(data, x.gen, x.ep.gen)
		r.JournalRecords = n
		return pending, nil
	case s.torn != nil:
		r.Notes = append(r.Notes, fmt.Sprintf("lease journal %s: torn tail at offset %d (%d bytes, a write a crash cut short; "+
			"overwritten with zeros at the next start): %v", path, s.end, s.tornTo-s.end, s.torn))
	}
	return s.pending, nil
}

// Overcommitted describes the GPUs whose restored leases add up to more
// than the GPU's memory.
func Overcommitted(leases []placement.Lease) []string {
	sum := map[string]int64{}
	total := map[string]int64{}
	for _, l := range leases {
		if l.State == placement.StateGranted && l.GPUTotalBytes > 0 {
			sum[l.GPU] += l.Bytes
			total[l.GPU] = l.GPUTotalBytes
		}
	}
	var out []string
	for gpu, s := range sum {
		if s > total[gpu] {
			out = append(out, fmt.Sprintf("GPU %s: leases hold %d bytes of %d: the daemon marks the excess leases 'overcommitted after restore' at start", gpu, s, total[gpu]))
		}
	}
	return out
}
