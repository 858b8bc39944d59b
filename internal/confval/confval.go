// Package confval holds what the packages that own a wsched.toml section
// share: value types that decode from TOML text (Fraction, enumerations)
// and KeyError, the validation error naming the offending key. It imports
// no TOML library; internal/config does the decoding.
package confval

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrBadValue is matched by every KeyError.
var ErrBadValue = errors.New("bad value")

// KeyError is a bad value in a section. Key is relative to the section
// ("safety_factor"); a "#n" suffix on a path element ("sim#2.memory") picks
// the n-th entry of an array of tables.
type KeyError struct {
	Key string
	Msg string
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Msg }

// Unwrap makes a KeyError match ErrBadValue.
func (e *KeyError) Unwrap() error { return ErrBadValue }

// Bad returns a KeyError for key with a formatted message.
func Bad(key, format string, args ...any) error {
	return &KeyError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Enum validates s against allowed and returns it lower-cased.
func Enum(s string, allowed ...string) (string, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	if slices.Contains(allowed, v) {
		return v, nil
	}
	return "", fmt.Errorf("%q is not allowed: want one of %s", s, strings.Join(allowed, ", "))
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
	if !(v >= 0 && v <= 1) { // NaN compares false: refused too
		return fmt.Errorf("%s is not allowed: want a number from 0 to 1", strconv.FormatFloat(v, 'g', -1, 64))
	}
	*f = Fraction(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (f Fraction) MarshalText() ([]byte, error) {
	return []byte(strconv.FormatFloat(float64(f), 'f', -1, 64)), nil
}
