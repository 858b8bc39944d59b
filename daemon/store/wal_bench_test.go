package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsched/wsched/placement"
)

// BenchmarkJournalCommit alternates one-record commits to the journal as
// it is (records overwrite the zeros the file was grown by) with the same
// records appended to a file that grows with each commit (how the journal
// worked before), each made durable with fdatasync, and reports both and
// the ratio: what preallocation saves per commit on this filesystem.
func BenchmarkJournalCommit(b *testing.B) {
	dir := b.TempDir()
	w, err := newJournal(dir, walHead{gen: 1}, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer w.close()
	plain, err := os.OpenFile(filepath.Join(dir, "append.wal"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	l := lease("l-bench")
	change := []placement.Change{{Put: &l}}
	rec := appendRecord(nil, 1, walRecord{Put: &l})
	var tw, ta time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := w.append(change); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := plain.Write(rec); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(plain.Fd())); err != nil {
			b.Fatal(err)
		}
		tw, ta = tw+t1.Sub(t0), ta+time.Since(t1)
		if w.size > walCompactBytes { // as compaction would: start over
			w.size = walFileHeader
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(tw.Nanoseconds())/float64(b.N), "prealloc-ns/commit")
	b.ReportMetric(float64(ta.Nanoseconds())/float64(b.N), "append-ns/commit")
	b.ReportMetric(float64(tw)/float64(ta), "prealloc/append")
}

// BenchmarkCompaction times one fold of a full journal into bbolt (what a
// commit that crosses walCompactBytes waits for) after a grant+release churn
// of distinct leases, the journal's worst case: every record a new ID, and
// next to it one grant+release commit, the usual cost. It reports both and
// the ratio.
func BenchmarkCompaction(b *testing.B) {
	var fold, commit time.Duration
	var changes int
	for range b.N {
		b.StopTimer()
		db, err := Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		l := lease("l-0")
		for i := 0; db.wal.size+2*int64(len(appendRecord(nil, 1, walRecord{Put: &l}))) < walCompactBytes; i++ {
			l.ID = fmt.Sprintf("l-%08d", i)
			if err := db.Apply([]placement.Change{{Put: &l}, {Delete: l.ID}}); err != nil {
				b.Fatal(err)
			}
			changes += 2
		}
		b.StartTimer()
		t0 := time.Now()
		l.ID = "l-last" // four records: past walCompactBytes, this commit folds
		if err := db.Apply([]placement.Change{{Put: &l}, {Delete: l.ID}, {Put: &l}, {Delete: l.ID}}); err != nil {
			b.Fatal(err)
		}
		if db.wal.size != walFileHeader {
			b.Fatalf("journal at %d bytes: the commit did not fold", db.wal.size)
		}
		t1 := time.Now()
		if err := db.Apply([]placement.Change{{Put: &l}, {Delete: l.ID}}); err != nil {
			b.Fatal(err)
		}
		fold, commit = fold+t1.Sub(t0), commit+time.Since(t1)
		b.StopTimer()
		_ = db.Close()
	}
	b.ReportMetric(float64(fold.Nanoseconds())/float64(b.N), "fold-ns")
	b.ReportMetric(float64(commit.Nanoseconds())/float64(b.N), "commit-ns")
	b.ReportMetric(float64(fold)/float64(commit), "fold/commit")
	b.ReportMetric(float64(changes)/float64(b.N), "changes/fold")
}

// BenchmarkJournalCommitAfterIdle times one-record commits that each
// follow gap of idleness (WSCHED_BENCH_IDLE, default 10ms; the gap itself
// is not timed), as a lone grant or a dispatch after a quiet spell sees
// them, and reports the median and 99th percentile next to the same
// commits back to back.
func BenchmarkJournalCommitAfterIdle(b *testing.B) {
	gap := 10 * time.Millisecond
	if v := os.Getenv("WSCHED_BENCH_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		gap = d
	}
	w, err := newJournal(b.TempDir(), walHead{gen: 1}, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer w.close()
	l := lease("l-bench")
	change := []placement.Change{{Put: &l}}
	commit := func(pause time.Duration) time.Duration {
		time.Sleep(pause)
		t0 := time.Now()
		if err := w.append(change); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	idle, busy := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		d := commit(gap)
		b.StartTimer()
		idle, busy = append(idle, d), append(busy, commit(0))
	}
	b.StopTimer()
	pct := func(ds []time.Duration, p float64) float64 {
		slices.Sort(ds)
		return float64(ds[int(p*float64(len(ds)-1))].Nanoseconds())
	}
	b.ReportMetric(pct(idle, 0.5), "idle-p50-ns")
	b.ReportMetric(pct(idle, 0.99), "idle-p99-ns")
	b.ReportMetric(pct(busy, 0.5), "busy-p50-ns")
	b.ReportMetric(pct(idle, 0.5)/pct(busy, 0.5), "idle/busy-p50")
}
