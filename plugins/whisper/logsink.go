//go:build whisper

package whisper

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// logLine is one whole line whisper.cpp or ggml logged.
type logLine struct {
	level int
	text  string
}

// logSink receives whisper.cpp's and ggml's log text through the C callback
// (whisper_log_set is process-wide: one Backend per process). Each line
// carries the tag of the call whose thread logged it (0: none, e.g. ggml's
// worker threads), set by the C wrappers around every blocking whisper.cpp
// call. The sink joins pieces into lines per tag, mirrors them to the
// backend's logger, collects them for their call, and springs that call's
// allocation-failure trap.
type logSink struct {
	log *slog.Logger

	mu    sync.Mutex
	parts map[uint64]*partLine  // pieces of a line not yet ended, per tag
	calls map[uint64]*collector // the calls in flight, by tag
}

// partLine is a line in pieces (GGML_LOG_LEVEL_CONT).
type partLine struct {
	text  strings.Builder
	level int
}

// collector is one call's view of the log: its lines, and its trap.
type collector struct {
	lines []logLine
	trap  chan string // an allocation failure's line; buffered 1
}

func newLogSink(log *slog.Logger) *logSink {
	return &logSink{log: log, parts: map[uint64]*partLine{}, calls: map[uint64]*collector{}}
}

// arm starts collecting the lines tagged tag; disarm stops and returns them.
func (s *logSink) arm(tag uint64) *collector {
	c := &collector{trap: make(chan string, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[tag] = c
	return c
}

func (s *logSink) disarm(tag uint64) []logLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls[tag]
	delete(s.calls, tag)
	delete(s.parts, tag)
	if c == nil {
		return nil
	}
	return c.lines
}

// write takes one callback's text: normally a whole line, but ggml may send
// GGML_LOG_LEVEL_CONT pieces.
func (s *logSink) write(tag uint64, level int, text string) {
	s.mu.Lock()
	part := s.parts[tag]
	if part == nil {
		part = &partLine{}
		s.parts[tag] = part
	}
	if level != levelCont {
		part.level = level
	}
	part.text.WriteString(text)
	buf := part.text.String()
	var lines []logLine
	for {
		i := strings.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, logLine{level: part.level, text: buf[:i]})
		buf = buf[i+1:]
	}
	part.text.Reset()
	part.text.WriteString(buf)
	if buf == "" && s.calls[tag] == nil {
		delete(s.parts, tag)
	}
	trap := s.record(tag, lines)
	s.mu.Unlock()
	if trap {
		parkForever()
	}
}

// record mirrors and collects lines; it reports whether one of them is an
// allocation failure with a trap armed, after handing that line to the
// trap: the tagged call's, or, for an untagged line (a worker thread of
// some call), every call's in flight, since any of them may now wait on
// the parked thread.
func (s *logSink) record(tag uint64, lines []logLine) (trapped bool) {
	c := s.calls[tag]
	for _, l := range lines {
		s.log.Log(context.Background(), slogLevel(l.level), "whisper.cpp", "line", l.text)
		if c != nil {
			c.lines = append(c.lines, l)
		}
		if !allocationFailure(l.text) {
			continue
		}
		switch {
		case c != nil:
			trapped = c.spring(l.text) || trapped
		case tag == 0:
			for _, other := range s.calls {
				trapped = other.spring(l.text) || trapped
			}
		}
	}
	return trapped
}

// spring hands line to the trap once; it reports whether it did.
func (c *collector) spring(line string) bool {
	select {
	case c.trap <- line:
		return true
	default:
		return false
	}
}

// parkForever stops the thread that logged an allocation failure before it
// returns into whisper.cpp, which in 1.9.5 does not survive most of them: a
// model buffer that failed to allocate trips GGML_ASSERT later in the same
// call, a failed CUDA allocation calls GGML_ABORT right after logging, and a
// failed KV-cache regrowth frees the state the context still points to. The
// waiting call returns ErrOutOfMemory instead; the backend refuses further
// work and the host restarts the process.
func parkForever() {
	select {}
}

// allocationFailure recognises the lines ggml and whisper.cpp 1.9.5 log
// when memory runs out: "failed to allocate …" (ggml-alloc, ggml-backend,
// whisper.cpp's KV cache and compute buffers), "insufficient memory"
// (ggml_aligned_malloc), "failed to init … allocator" (whisper_sched_graph_init),
// and CUDA's "out of memory" (cudaMalloc failed / CUDA error).
func allocationFailure(line string) bool {
	l := strings.ToLower(line)
	return strings.Contains(l, "failed to allocate") ||
		strings.Contains(l, "insufficient memory") ||
		strings.Contains(l, "out of memory") ||
		(strings.Contains(l, "failed to init") && strings.Contains(l, "allocator"))
}

// slogLevel maps ggml's levels. whisper.cpp's info lines (model hyper-
// parameters, buffer sizes, timings) go to debug: the backend logs one line
// of its own per load.
func slogLevel(level int) slog.Level {
	switch level {
	case levelError:
		return slog.LevelError
	case levelWarn:
		return slog.LevelWarn
	}
	return slog.LevelDebug
}
