package jobs

import "time"

// The short-job reserve. Of the MaxActive slots (jobs placed at once),
// ShortReserve are kept for short jobs — less audio than ShortAudio — so
// that a burst of long files cannot take every slot while clips queue
// behind them: a long job is dispatched only while fewer than MaxActive −
// ShortReserve long jobs are active; short jobs behind it in the order go
// first meanwhile. Audio of unknown duration counts as long. The chunks
// of a long file are as long as their windows (30 s: short by default).
// `wsched sim`'s wsched policy models the same rule over streams.

// DefaultShortAudio is [jobs] short_audio's default: `wsched sim --short`.
const DefaultShortAudio = time.Minute

// SetShortReserve sets [jobs] short_reserve and short_audio
// (Config.ShortReserve, Config.ShortAudio); call it before Run. The
// reserve is at most an eighth of MaxActive (none below 8), so that a
// small max_active is not taken from long jobs.
func (m *Manager) SetShortReserve(reserve int, shortAudio time.Duration) {
	m.cfg.ShortReserve = min(max(reserve, 0), m.cfg.MaxActive/8)
	m.cfg.ShortAudio = shortAudio
	if m.cfg.ShortAudio <= 0 {
		m.cfg.ShortAudio = DefaultShortAudio
	}
}

// isLong reports whether e counts against the slots long jobs may take.
func (s *mstate) isLong(e *entry) bool {
	c := s.m.cfg
	return c.ShortReserve > 0 && !(e.job.AudioSeconds > 0 && e.job.AudioSeconds < c.ShortAudio.Seconds())
}

// nextDispatch is the index in the (sorted) pending list of the job to
// dispatch next: the first, unless it is long and the long jobs' slots are
// taken, then the first short one; -1 when none may go.
func (s *mstate) nextDispatch() int {
	longRoom := s.activeLong < s.m.cfg.MaxActive-s.m.cfg.ShortReserve
	held := s.chunkGate()
	for k, e := range s.pending {
		if (longRoom || !s.isLong(e)) && !held(e) {
			return k
		}
	}
	return -1
}

// holdLong counts e, just dispatched, among the active long jobs.
func (s *mstate) holdLong(e *entry) {
	if s.isLong(e) {
		e.long = true
		s.activeLong++
	}
}

// releaseLong gives back e's long slot, if it holds one.
func (s *mstate) releaseLong(e *entry) {
	if e.long {
		e.long = false
		s.activeLong--
	}
}
