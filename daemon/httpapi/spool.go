package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/wsched/wsched/internal/units"
)

// spoolDir is where uploads wait for their jobs: [jobs] spool_dir, or
// [daemon] state_dir/uploads.
func (s *Server) spoolDir() string { return s.cfg.Spool() }

func insufficientStorage(format string, args ...any) error {
	return &httpError{status: http.StatusInsufficientStorage, code: "insufficient_storage", err: fmt.Errorf(format, args...)}
}

// freeBytes is the space an unprivileged writer may still use on the file
// system holding path.
func freeBytes(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// diskState is the free space under the state directory and the spool.
type diskState struct {
	StateDir   string `json:"state_dir"`
	StateFree  int64  `json:"state_free_bytes"`
	SpoolDir   string `json:"spool_dir"`
	SpoolFree  int64  `json:"spool_free_bytes"`
	SpoolUsed  int64  `json:"spool_used_bytes"`
	SpoolQuota int64  `json:"spool_quota_bytes"`
	// SpoolReserved is reserved for uploads in progress, not yet written.
	SpoolReserved int64  `json:"spool_reserved_bytes"`
	MinFree       int64  `json:"min_free_bytes"`
	Low           bool   `json:"low"`
	Err           string `json:"error,omitempty"`
	lowWhere      string
}

func (s *Server) disk() diskState {
	d := diskState{StateDir: s.cfg.Daemon.StateDir, SpoolDir: s.spoolDir(),
		SpoolQuota: int64(s.cfg.Jobs.SpoolQuota), MinFree: int64(s.cfg.Jobs.MinFreeDisk), SpoolReserved: s.spool.pending.Load()}
	var err error
	if d.StateFree, err = freeBytes(d.StateDir); err != nil {
		d.Err = err.Error()
		return d
	}
	d.SpoolFree, d.SpoolUsed = d.StateFree, 0
	if st, err := os.Stat(d.SpoolDir); err == nil && st.IsDir() {
		if d.SpoolFree, err = freeBytes(d.SpoolDir); err != nil {
			d.Err = err.Error()
		}
		d.SpoolUsed = dirBytes(d.SpoolDir)
	}
	switch {
	case d.StateFree < d.MinFree:
		d.Low, d.lowWhere = true, d.StateDir
	case d.SpoolFree < d.MinFree:
		d.Low, d.lowWhere = true, d.SpoolDir
	}
	return d
}

// dirBytes sums the sizes of the files directly in dir.
func dirBytes(dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n
}

// spoolChunk is how much more an upload of unknown length reserves each
// time it outgrows its reservation.
const spoolChunk = 4 << 20

// spoolBook counts the spool bytes reserved for uploads being written and
// not yet on disk. Every reservation is checked, under mu, against the
// quota and the free-space floor with all other reservations counted, so
// concurrent uploads cannot pass either together.
type spoolBook struct {
	mu      sync.Mutex   // serialises the checks that add to pending
	pending atomic.Int64 // taken back without mu: that only makes room
}

// reservation is the room one upload holds in the spool: held bytes are
// reserved and not yet written.
type reservation struct {
	s      *Server
	held   int64
	failed error // the refusal that stopped the upload, if any
}

// reserveSpool reserves n bytes for an upload (at admission: its
// Content-Length, else nothing yet), or answers 507 naming the setting
// that leaves no room.
func (s *Server) reserveSpool(n int64) (*reservation, error) {
	r := &reservation{s: s}
	if err := r.grow(n); err != nil {
		return nil, err
	}
	return r, nil
}

// grow reserves n more bytes.
func (r *reservation) grow(n int64) error {
	b := &r.s.spool
	b.mu.Lock()
	defer b.mu.Unlock()
	d := r.s.disk()
	if d.Err != "" {
		return errors.New(d.Err)
	}
	if d.Low {
		return insufficientStorage("uploads are refused: %s has %s free, less than [jobs] min_free_disk (%s)",
			d.lowWhere, units.FormatBytes(min(d.StateFree, d.SpoolFree)), units.FormatBytes(d.MinFree))
	}
	pending := d.SpoolReserved
	if free := min(d.StateFree, d.SpoolFree) - pending; free-n < d.MinFree {
		return insufficientStorage("uploads are refused: %s more would leave %s free (%s reserved for uploads in progress), less than [jobs] min_free_disk (%s)",
			units.FormatBytes(n), units.FormatBytes(max(0, free-n)), units.FormatBytes(pending), units.FormatBytes(d.MinFree))
	}
	if d.SpoolQuota > 0 && d.SpoolUsed+pending+n > d.SpoolQuota {
		return insufficientStorage("uploads are refused: the spool %s holds %s and %s is reserved for uploads in progress; %s more would pass [jobs] spool_quota (%s)",
			d.SpoolDir, units.FormatBytes(d.SpoolUsed), units.FormatBytes(pending), units.FormatBytes(n), units.FormatBytes(d.SpoolQuota))
	}
	b.pending.Add(n)
	r.held += n
	return nil
}

// wrote moves n written bytes out of the reservation: they are on disk now
// (counted by the spool's size and the free space).
func (r *reservation) wrote(n int64) {
	n = min(n, r.held)
	r.held -= n
	r.s.spool.pending.Add(-n)
}

// release gives back what the upload reserved and did not write.
func (r *reservation) release() {
	r.s.spool.pending.Add(-r.held)
	r.held = 0
}

// spoolWriter writes an upload into its spool file within its
// reservation, reserving more as the data streams in (spoolChunk at a
// time, no more than limit in all; near the quota or the floor, just what
// each write needs).
type spoolWriter struct {
	f       *os.File
	res     *reservation
	written int64
	limit   int64
}

func (w *spoolWriter) Write(p []byte) (int, error) {
	if need := int64(len(p)) - w.res.held; need > 0 {
		err := w.res.grow(max(need, min(spoolChunk, w.limit-w.written-w.res.held)))
		if err != nil { // near the quota or the floor: only what this write needs
			err = w.res.grow(need)
		}
		if err != nil {
			w.res.failed = err
			return 0, err
		}
	}
	n, err := w.f.Write(p)
	w.written += int64(n)
	w.res.wrote(int64(n))
	return n, err
}

// uploadPrefix starts the name of every file the daemon writes into the
// spool.
const uploadPrefix = "upload-"

// RemoveOrphanUploads deletes the spool files no unfinished job refers to:
// uploads a crash interrupted, and audio of jobs that ended while their
// file could not be removed. Call it once at start, after the job manager
// recovered its jobs and before the API serves (no upload is in progress):
// an orphan would otherwise count against [jobs] spool_quota forever.
func (s *Server) RemoveOrphanUploads(ctx context.Context) error {
	dir := s.spoolDir()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read spool %s: %w", dir, err)
	}
	all, err := s.jobs.List(ctx)
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	keep := map[string]bool{}
	for _, j := range all {
		if j.Spec.Uploaded && !j.State.Finished() {
			keep[filepath.Clean(j.Spec.AudioPath)] = true
		}
	}
	var n, bytes int64
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if !strings.HasPrefix(e.Name(), uploadPrefix) || !e.Type().IsRegular() || keep[path] {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("cannot remove orphan upload", "path", path, "err", err)
			continue
		}
		n, bytes = n+1, bytes+info.Size()
	}
	if n > 0 {
		s.log.Info("removed uploads no job refers to (interrupted by a crash)", "files", n, "bytes", bytes, "spool", dir)
	}
	return nil
}
