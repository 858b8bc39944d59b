package plugins

import (
	"io"
	"log/slog"
	"strings"
)

// NewLogger returns a slog logger for a backend that writes to w (normally
// os.Stderr) in the JSON shape go-plugin's host parses (@level, @message,
// @timestamp), so the daemon's copy of a backend's log keeps its level and
// key/value pairs instead of showing raw lines at debug level.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level:       level,
		ReplaceAttr: hclogAttr,
	}))
}

// hclogTime is the timestamp layout go-plugin's log parser accepts.
const hclogTime = "2006-01-02T15:04:05.000000Z07:00"

// hclogAttr renames slog's built-in keys to hclog's.
func hclogAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		return slog.String("@timestamp", a.Value.Time().Format(hclogTime))
	case slog.LevelKey:
		return slog.String("@level", strings.ToLower(levelName(a.Value)))
	case slog.MessageKey:
		return slog.String("@message", a.Value.String())
	}
	return a
}

func levelName(v slog.Value) string {
	if l, ok := v.Any().(slog.Level); ok {
		switch {
		case l < slog.LevelDebug:
			return "trace"
		case l < slog.LevelInfo:
			return "debug"
		case l < slog.LevelWarn:
			return "info"
		case l < slog.LevelError:
			return "warn"
		}
		return "error"
	}
	return v.String()
}
