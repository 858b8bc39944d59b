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
	var err error
	if r.Epoch, err = readEpoch(dir); err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	pending, records, torn := readJournal(dir, WALName)
	r.JournalRecords = records
	if torn != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("lease journal: torn tail (dropped at the next start): %v", torn))
	}
	if err := checkEpoch(path, r.Epoch); err != nil {
		r.Problems = append(r.Problems, err.Error())
		r.Leases = overlay(nil, pending)
		return r, nil
	}
	stored, err := readBolt(path, &r)
	if errors.Is(err, ErrLocked) {
		return r, err
	}
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	r.Leases = overlay(stored, pending)
	r.Notes = append(r.Notes, Overcommitted(r.Leases)...)
	return r, nil
}

// readBolt opens path read-only, checks its pages and reads its leases
// and sequence into r.
func readBolt(path string, r *Report) ([]placement.Lease, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
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
			r.Seq = boltSeq(tx)
			for err := range tx.Check() {
				return fmt.Errorf("%w: page check: %w", ErrDamaged, err)
			}
			stored, err = List[placement.Lease](db, bucketLeases)
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

// readJournal replays the journal name in dir without changing it.
func readJournal(dir, name string) (map[string]*placement.Lease, int, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, 0, err
	}
	pending, records, _, torn := replay(data)
	return pending, records, torn
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
