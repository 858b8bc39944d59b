package units

import (
	"fmt"
	"strings"
	"time"
)

// Duration is a time.Duration that reads and writes itself in Go syntax
// ("500ms", "5m") in TOML and JSON text form.
type Duration time.Duration

// ParseDuration parses a Go duration string and rejects negative values.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, ErrEmpty
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("%q: %w: want a Go duration such as \"500ms\", \"30s\", \"5m\"", s, ErrBadNumber)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q: %w", s, ErrNegative)
	}
	return d, nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := ParseDuration(string(text))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String renders the duration in Go syntax.
func (d Duration) String() string { return time.Duration(d).String() }
