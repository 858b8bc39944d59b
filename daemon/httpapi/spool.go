package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/wsched/wsched/internal/units"
)

// spoolDir is where uploads wait for their jobs: [jobs] spool_dir, or
// [daemon] state_dir/uploads.
func (s *Server) spoolDir() string {
	if s.cfg.Jobs.SpoolDir != "" {
		return s.cfg.Jobs.SpoolDir
	}
	return filepath.Join(s.cfg.Daemon.StateDir, "uploads")
}

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
	MinFree    int64  `json:"min_free_bytes"`
	Low        bool   `json:"low"`
	Err        string `json:"error,omitempty"`
	lowWhere   string
}

func (s *Server) disk() diskState {
	d := diskState{StateDir: s.cfg.Daemon.StateDir, SpoolDir: s.spoolDir(),
		SpoolQuota: int64(s.cfg.Jobs.SpoolQuota), MinFree: int64(s.cfg.Jobs.MinFreeDisk)}
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

// uploadRoom checks the disk before an upload and returns how many bytes
// it may take: at most limit, what the spool quota leaves, and what keeps
// [jobs] min_free_disk free. A stalled or huge upload thus cannot fill the
// file system the database lives on.
func (s *Server) uploadRoom(limit int64) (int64, error) {
	d := s.disk()
	if d.Err != "" {
		return 0, errors.New(d.Err)
	}
	if d.Low {
		return 0, insufficientStorage("uploads are refused: %s has %s free, less than [jobs] min_free_disk (%s)",
			d.lowWhere, units.FormatBytes(min(d.StateFree, d.SpoolFree)), units.FormatBytes(d.MinFree))
	}
	room := min(limit, d.StateFree-d.MinFree, d.SpoolFree-d.MinFree)
	if d.SpoolQuota > 0 {
		if d.SpoolUsed >= d.SpoolQuota {
			return 0, insufficientStorage("uploads are refused: the spool %s holds %s, [jobs] spool_quota is %s",
				d.SpoolDir, units.FormatBytes(d.SpoolUsed), units.FormatBytes(d.SpoolQuota))
		}
		room = min(room, d.SpoolQuota-d.SpoolUsed)
	}
	return room, nil
}
