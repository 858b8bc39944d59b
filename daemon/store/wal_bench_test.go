package store

import (
	"log/slog"
	"os"
	"path/filepath"
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
	w, err := openWAL(filepath.Join(dir, WALName), slog.New(slog.DiscardHandler))
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
	rec := appendRecord(nil, walRecord{Put: &l})
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
			if err := w.truncate(0); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(tw.Nanoseconds())/float64(b.N), "prealloc-ns/commit")
	b.ReportMetric(float64(ta.Nanoseconds())/float64(b.N), "append-ns/commit")
	b.ReportMetric(float64(tw)/float64(ta), "prealloc/append")
}
