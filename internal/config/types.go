package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/wsched/wsched/internal/confval"
)

// LogLevel is a slog level name.
type LogLevel string

// UnmarshalText implements encoding.TextUnmarshaler.
func (l *LogLevel) UnmarshalText(b []byte) error {
	v, err := confval.Enum(string(b), "debug", "info", "warn", "error")
	*l = LogLevel(v)
	return err
}

// LogFormat is text or json.
type LogFormat string

// UnmarshalText implements encoding.TextUnmarshaler.
func (l *LogFormat) UnmarshalText(b []byte) error {
	v, err := confval.Enum(string(b), "text", "json")
	*l = LogFormat(v)
	return err
}

// FileMode is a permission mode written as an octal string ("0660").
type FileMode os.FileMode

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *FileMode) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o777 || !strings.HasPrefix(s, "0") {
		return fmt.Errorf("%q is not allowed: want an octal mode such as \"0660\"", s)
	}
	*m = FileMode(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (m FileMode) MarshalText() ([]byte, error) { return []byte(fmt.Sprintf("%04o", uint32(m))), nil }

// Perm returns the mode as an os.FileMode.
func (m FileMode) Perm() os.FileMode { return os.FileMode(m) }
