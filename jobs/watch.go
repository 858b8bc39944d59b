package jobs

import (
	"context"
	"fmt"

	"github.com/wsched/wsched/jobs/transcript"
)

// watchBuffer is how many events a watcher may fall behind before it is
// dropped (its channel closed) rather than stall the owner loop.
const watchBuffer = 1024

// Watch returns a channel of every job's state and progress events (not
// segments) from now on, for monitors and metrics: each event carries the
// job as it is then, its result without text or segments. The channel closes when stop is
// called, when the manager stops, or when the reader falls behind (then
// List and Watch again).
func (m *Manager) Watch(ctx context.Context) (<-chan Event, func(), error) {
	ch := make(chan Event, watchBuffer)
	var id int
	if err := m.do(ctx, func(s *mstate) {
		if s.watchers == nil {
			s.watchers = map[int]chan Event{}
		}
		s.nextSub++
		id = s.nextSub
		s.watchers[id] = ch
	}); err != nil {
		return nil, nil, fmt.Errorf("watch jobs: %w", err)
	}
	stop := func() {
		_ = m.do(context.Background(), func(s *mstate) {
			if c, ok := s.watchers[id]; ok {
				delete(s.watchers, id)
				close(c)
			}
		})
	}
	return ch, stop, nil
}

// tellWatchers fans an event out to the watchers; a full one is dropped.
func (s *mstate) tellWatchers(ev Event) {
	if ev.Type == EventSegment || len(s.watchers) == 0 {
		return
	}
	if r := ev.Job.Result; r != nil { // the duration and language; not the text
		ev.Job.Result = &transcript.Transcript{Task: r.Task, Language: r.Language, Duration: r.Duration}
	}
	if ev.Job.State == Pending { // a queued job: when it is expected to start (top, the monitor page)
		ev.Job.ExpectedStart = s.expectedStarts()[ev.Job.ID]
	}
	for id, ch := range s.watchers {
		select {
		case ch <- ev:
		default:
			close(ch)
			delete(s.watchers, id)
		}
	}
}

// closeWatchers ends every watch (shutdown).
func (s *mstate) closeWatchers() {
	for id, ch := range s.watchers {
		close(ch)
		delete(s.watchers, id)
	}
}
