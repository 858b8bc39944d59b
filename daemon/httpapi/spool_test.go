package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/jobs"
)

// listJobs is a Jobs that lists a fixed set of jobs.
type listJobs struct {
	Jobs
	jobs []jobs.Job
}

func (l listJobs) List(context.Context) ([]jobs.Job, error) { return l.jobs, nil }

func spoolServer(t *testing.T, mod func(*config.Config), js ...jobs.Job) (*Server, string) {
	t.Helper()
	cfg := config.Defaults()
	cfg.Daemon.StateDir = t.TempDir()
	cfg.Jobs.SpoolDir = filepath.Join(t.TempDir(), "spool")
	if mod != nil {
		mod(cfg)
	}
	if err := os.MkdirAll(cfg.Jobs.SpoolDir, 0o750); err != nil {
		t.Fatal(err)
	}
	return New(Options{Config: cfg, Jobs: listJobs{jobs: js}}), cfg.Jobs.SpoolDir
}

// TestOrphanUploadsRemovedAtStart: spool files no unfinished job refers
// to (an upload a crash cut short, the audio of a finished job) are
// removed; the audio of a job that will resume, and files the daemon did
// not name, stay (issue 25 item 15).
func TestOrphanUploadsRemovedAtStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	path := func(name string) string { return filepath.Join(dir, name) }
	queued := jobs.Job{ID: "j1", State: jobs.Pending, Spec: jobs.Spec{Uploaded: true, AudioPath: path("upload-0001.wav")}}
	done := jobs.Job{ID: "j2", State: jobs.Completed, Spec: jobs.Spec{Uploaded: true, AudioPath: path("upload-0002.wav")}}
	s, _ := spoolServer(t, func(c *config.Config) { c.Jobs.SpoolDir = dir }, queued, done)
	files := map[string]bool{"upload-0001.wav": true, "upload-0002.wav": false, "upload-cut.ogg": false, "notes.txt": true}
	for name := range files {
		if err := os.WriteFile(path(name), make([]byte, 1000), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RemoveOrphanUploads(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, kept := range files {
		_, err := os.Stat(path(name))
		if got := err == nil; got != kept {
			t.Errorf("%s: kept %v, want %v", name, got, kept)
		}
	}
	if used := s.disk().SpoolUsed; used != 2000 {
		t.Errorf("spool holds %d bytes after the orphans went, want 2000", used)
	}
}

// TestSpoolReservationsAreShared: reservations count against the quota
// together, in any order, and what is released or written moves out of
// them (issue 25 item 8).
func TestSpoolReservationsAreShared(t *testing.T) {
	s, _ := spoolServer(t, func(c *config.Config) {
		c.Jobs.MinFreeDisk, c.Jobs.MaxUpload, c.Jobs.SpoolQuota = 0, units.Bytes(100<<10), units.Bytes(1<<20)
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []*reservation
	refused := 0
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.reserveSpool(100 << 10)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				var he *httpError
				if !errors.As(err, &he) || he.status != http.StatusInsufficientStorage || !strings.Contains(err.Error(), "[jobs] spool_quota") {
					t.Errorf("refusal: %v, want 507 naming spool_quota", err)
				}
				refused++
				return
			}
			held = append(held, r)
		}()
	}
	wg.Wait()
	if len(held) != 10 || refused != 22 {
		t.Fatalf("32 reservations of 100 KiB against a 1 MiB quota: %d held, %d refused; want 10 and 22", len(held), refused)
	}
	for _, r := range held {
		r.release()
	}
	if got := s.spool.pending.Load(); got != 0 {
		t.Fatalf("%d bytes still reserved after every release", got)
	}
	if _, err := s.reserveSpool(1 << 20); err != nil {
		t.Fatalf("the whole quota after the releases: %v", err)
	}
}

func TestNoSpaceIs507(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT} {
		err := uploadError(fmt.Errorf("write spool: %w", &os.PathError{Op: "write", Path: "x", Err: errno}), 1)
		var he *httpError
		if !errors.As(err, &he) || he.status != http.StatusInsufficientStorage {
			t.Errorf("%v: %v, want 507", errno, err)
		}
	}
}

// TestStreamedUploadReservesAsItGrows: a body of unknown length reserves
// room as it streams; past the quota it stops with 507, leaves no file,
// and gives its reservation back.
func TestStreamedUploadReservesAsItGrows(t *testing.T) {
	s, dir := spoolServer(t, func(c *config.Config) {
		c.Jobs.MinFreeDisk, c.Jobs.MaxUpload, c.Jobs.SpoolQuota = 0, units.Bytes(3<<20), units.Bytes(1<<20)
	})
	_, err := s.saveUpload(strings.NewReader(strings.Repeat("x", 3<<19)), 3<<20)
	var he *httpError
	if !errors.As(err, &he) || he.status != http.StatusInsufficientStorage || !strings.Contains(err.Error(), "upload stopped at") {
		t.Fatalf("1.5 MiB streamed against a 1 MiB quota: %v, want 507 upload stopped", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("%d files left in the spool", len(entries))
	}
	if got := s.spool.pending.Load(); got != 0 {
		t.Errorf("%d bytes still reserved", got)
	}
	path, err := s.saveUpload(strings.NewReader(strings.Repeat("x", 900<<10)), 3<<20)
	if err != nil {
		t.Fatalf("900 KiB streamed within the quota: %v", err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 900<<10 || s.spool.pending.Load() != 0 {
		t.Errorf("saved %v (%v), %d bytes still reserved", st, err, s.spool.pending.Load())
	}
}
