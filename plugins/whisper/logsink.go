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
// (whisper_log_set is process-wide: one Backend per process). It joins pieces
// into lines, mirrors them to the backend's logger, collects them for the
// call in flight, and springs that call's allocation-failure trap.
type logSink struct {
	log *slog.Logger

	mu        sync.Mutex
	part      strings.Builder
	partLevel int
	lines     *[]logLine    // the call in flight's collector; nil between calls
	trap      chan<- string // the call in flight's allocation-failure trap
}

// arm starts collecting for a call and sets its trap; disarm stops.
func (s *logSink) arm(lines *[]logLine, trap chan<- string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines, s.trap = lines, trap
}

func (s *logSink) disarm() { s.arm(nil, nil) }

// write takes one callback's text: normally a whole line, but ggml may send
// GGML_LOG_LEVEL_CONT pieces.
func (s *logSink) write(level int, text string) {
	s.mu.Lock()
	if level != levelCont {
		s.partLevel = level
	}
	s.part.WriteString(text)
	buf := s.part.String()
	var lines []logLine
	for {
		i := strings.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, logLine{level: s.partLevel, text: buf[:i]})
		buf = buf[i+1:]
	}
	s.part.Reset()
	s.part.WriteString(buf)
	trap := s.record(lines)
	s.mu.Unlock()
	if trap {
		parkForever()
	}
}

// record mirrors and collects lines; it reports whether one of them is an
// allocation failure with the trap armed, after handing that line to the trap.
func (s *logSink) record(lines []logLine) (trapped bool) {
	for _, l := range lines {
		s.log.Log(context.Background(), slogLevel(l.level), "whisper.cpp", "line", l.text)
		if s.lines != nil {
			*s.lines = append(*s.lines, l)
		}
		if s.trap != nil && allocationFailure(l.text) {
			select {
			case s.trap <- l.text:
			default:
			}
			s.trap = nil
			trapped = true
		}
	}
	return trapped
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
