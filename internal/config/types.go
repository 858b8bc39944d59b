package config

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// enum validates s against allowed and returns it lower-cased.
func enum(s string, allowed ...string) (string, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	if slices.Contains(allowed, v) {
		return v, nil
	}
	return "", fmt.Errorf("%q is not allowed: want one of %s", s, strings.Join(allowed, ", "))
}

// Provider names the GPU inventory source.
type Provider string

// Inventory providers.
const (
	ProviderAuto Provider = "auto"
	ProviderNVML Provider = "nvml"
	ProviderSim  Provider = "sim"
	ProviderNone Provider = "none"
)

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *Provider) UnmarshalText(b []byte) error {
	v, err := enum(string(b), "auto", "nvml", "sim", "none")
	*p = Provider(v)
	return err
}

// Policy names the GPU choice policy.
type Policy string

// Placement policies.
const (
	PolicySpread  Policy = "spread"
	PolicyBinpack Policy = "binpack"
	PolicyScore   Policy = "score"
)

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *Policy) UnmarshalText(b []byte) error {
	v, err := enum(string(b), "spread", "binpack", "score")
	*p = Policy(v)
	return err
}

// OverrunAction says what happens when a holder uses more than its lease.
type OverrunAction string

// Overrun actions.
const (
	OverrunWarn OverrunAction = "warn"
	OverrunKill OverrunAction = "kill"
)

// UnmarshalText implements encoding.TextUnmarshaler.
func (o *OverrunAction) UnmarshalText(b []byte) error {
	v, err := enum(string(b), "warn", "kill")
	*o = OverrunAction(v)
	return err
}

// LogLevel is a slog level name.
type LogLevel string

// UnmarshalText implements encoding.TextUnmarshaler.
func (l *LogLevel) UnmarshalText(b []byte) error {
	v, err := enum(string(b), "debug", "info", "warn", "error")
	*l = LogLevel(v)
	return err
}

// LogFormat is text or json.
type LogFormat string

// UnmarshalText implements encoding.TextUnmarshaler.
func (l *LogFormat) UnmarshalText(b []byte) error {
	v, err := enum(string(b), "text", "json")
	*l = LogFormat(v)
	return err
}

// Fraction is a number in [0, 1], written as a TOML float (0.9).
type Fraction float64

// UnmarshalText implements encoding.TextUnmarshaler. TOML floats and
// integers reach it in decimal text form.
func (f *Fraction) UnmarshalText(b []byte) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		return fmt.Errorf("%q is not allowed: want a number from 0 to 1", b)
	}
	if v < 0 || v > 1 {
		return fmt.Errorf("%s is not allowed: want a number from 0 to 1", strconv.FormatFloat(v, 'g', -1, 64))
	}
	*f = Fraction(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (f Fraction) MarshalText() ([]byte, error) {
	return []byte(strconv.FormatFloat(float64(f), 'f', -1, 64)), nil
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
