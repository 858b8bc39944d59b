package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/jobs/audiocut"
)

// splitter cuts long jobs' audio for the job manager ([jobs] chunk_over):
// the chunks are WAV files under the spool's chunks directory, one folder
// per job. With VAD on for the job's model the windows end at pauses found
// from the samples' energy (the VAD model itself runs inside the backend,
// which the daemon cannot call for this), else every 30 s.
type splitter struct {
	dir string
	vad func(ctx context.Context, job jobs.Job) bool
	log *slog.Logger
}

var _ jobs.Splitter = (*splitter)(nil)

// chunksDir is [jobs] spool_dir/chunks (state_dir/uploads/chunks).
func chunksDir(cfg *config.Config) string { return filepath.Join(cfg.Spool(), "chunks") }

func (s *splitter) jobDir(id string) string { return filepath.Join(s.dir, filepath.Base(id)) }

// Split implements jobs.Splitter.
func (s *splitter) Split(ctx context.Context, job jobs.Job, over time.Duration) ([]jobs.ChunkFile, error) {
	dir := s.jobDir(job.ID)
	if err := os.RemoveAll(dir); err != nil { // an earlier run's, interrupted
		return nil, fmt.Errorf("split job %s: %w", job.ID, err)
	}
	pieces, err := audiocut.Cut(ctx, job.Spec.AudioPath, dir, audiocut.Options{Over: over, Pauses: s.vad(ctx, job)})
	if err != nil {
		return nil, fmt.Errorf("split job %s: %w", job.ID, err)
	}
	out := make([]jobs.ChunkFile, len(pieces))
	for i, p := range pieces {
		out[i] = jobs.ChunkFile{Window: p.Window, Path: p.Path}
	}
	return out, nil
}

// Clean implements jobs.Splitter.
func (s *splitter) Clean(job jobs.Job) {
	if err := os.RemoveAll(s.jobDir(job.ID)); err != nil {
		s.log.Warn("cannot remove a job's chunk files", "job", job.ID, "err", err)
	}
}

// removeChunks deletes every job's chunk files at start: the jobs that
// were running are cut again when they run.
func (s *splitter) removeChunks() {
	if err := os.RemoveAll(s.dir); err != nil {
		s.log.Warn("cannot remove old chunk files", "dir", s.dir, "err", err)
	}
}
