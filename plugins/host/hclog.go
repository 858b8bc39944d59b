package host

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter is the hclog.Logger go-plugin logs through, writing to a
// slog.Logger. go-plugin logs its own steps on the root logger and each line
// a backend writes to stderr on a logger Named after the binary; the
// backend's lines keep their level and key/value pairs, and go-plugin's own
// Info chatter ("plugin process exited", …) is demoted to Debug.
type hclogAdapter struct {
	log     *slog.Logger
	name    string
	implied []any
}

var _ hclog.Logger = (*hclogAdapter)(nil)

// newHCLog returns go-plugin's logger for a backend.
func newHCLog(l *slog.Logger) hclog.Logger { return &hclogAdapter{log: l} }

// slogLevel maps an hclog level to slog's (Trace sits below Debug).
func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error, hclog.Off:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	lv := slogLevel(level)
	if a.name == "" && lv == slog.LevelInfo {
		lv = slog.LevelDebug // go-plugin's own progress messages
	}
	ctx := context.Background()
	if !a.log.Enabled(ctx, lv) {
		return
	}
	attrs := make([]any, 0, len(args)+2)
	if a.name != "" {
		attrs = append(attrs, "logger", a.name)
	}
	for i := 0; i < len(args); i += 2 {
		if i+1 < len(args) && args[i] == "timestamp" {
			continue // go-plugin's copy of the backend's timestamp; slog stamps its own
		}
		attrs = append(attrs, args[i:min(i+2, len(args))]...)
	}
	a.log.Log(ctx, lv, msg, attrs...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(l hclog.Level) bool {
	return a.log.Enabled(context.Background(), slogLevel(l))
}

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{log: a.log.With(args...), name: a.name, implied: append(append([]any(nil), a.implied...), args...)}
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return a.ResetNamed(name)
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{log: a.log, name: name, implied: a.implied}
}

// SetLevel does nothing: the daemon's slog handler decides.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

// GetLevel reports the lowest level the slog handler takes.
func (a *hclogAdapter) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	level := slog.LevelInfo
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = slogLevel(opts.ForceLevel)
	}
	return slog.NewLogLogger(a.log.Handler(), level)
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return a.StandardLogger(opts).Writer()
}

// lineWriter logs each line written to it; go-plugin copies a backend's
// os.Stdout and os.Stderr (after plugins.Serve took them over) into one.
type lineWriter struct {
	log    *slog.Logger
	stream string
	mu     sync.Mutex
	buf    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		if line := bytes.TrimRight(w.buf[:i], "\r"); len(line) > 0 {
			w.log.Info(string(line), "stream", w.stream)
		}
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 64<<10 { // a very long line: log what there is
		w.log.Info(string(w.buf), "stream", w.stream)
		w.buf = w.buf[:0]
	}
	return len(p), nil
}
