// Package units parses and formats the quantities wsched's configuration and
// output use: byte sizes with units ("24GiB", "512MiB", "1.5GB") and Go-style
// durations ("500ms").
package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Sentinel errors returned (wrapped) by the parsers.
var (
	ErrEmpty       = errors.New("empty value")
	ErrNoUnit      = errors.New("missing unit")
	ErrUnknownUnit = errors.New("unknown unit")
	ErrBadNumber   = errors.New("bad number")
	ErrNegative    = errors.New("negative value")
	ErrOverflow    = errors.New("value too large")
)

// Byte multiples. Binary units (KiB, MiB, GiB, TiB) are powers of 1024,
// decimal units (kB, MB, GB, TB) powers of 1000, as in IEC 80000-13.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
	TiB int64 = 1 << 40

	KB int64 = 1000
	MB int64 = 1000 * KB
	GB int64 = 1000 * MB
	TB int64 = 1000 * GB
)

// AllowedSizeUnits is the list of unit suffixes ParseBytes accepts, for error
// messages and documentation.
const AllowedSizeUnits = "B, KiB, MiB, GiB, TiB, kB, MB, GB, TB"

var sizeUnits = map[string]int64{
	"b":   1,
	"kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB,
	"kb": KB, "mb": MB, "gb": GB, "tb": TB,
}

// ParseBytes parses a size such as "24GiB", "512 MiB", "1.5GB" or "0B" into
// bytes. A unit is required (a bare number is ambiguous); units are matched
// case-insensitively. Fractions are allowed and rounded to the nearest byte.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, ErrEmpty
	}
	i := strings.IndexFunc(t, func(r rune) bool {
		return (r < '0' || r > '9') && r != '.' && r != '-' && r != '+'
	})
	if i < 0 {
		return 0, fmt.Errorf("%q: %w (one of %s)", s, ErrNoUnit, AllowedSizeUnits)
	}
	num, unit := strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	mult, ok := sizeUnits[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("%q: %w %q (one of %s)", s, ErrUnknownUnit, unit, AllowedSizeUnits)
	}
	if num == "" {
		return 0, fmt.Errorf("%q: %w: no digits before the unit", s, ErrBadNumber)
	}
	if strings.ContainsAny(num, "+-") {
		if strings.HasPrefix(num, "-") {
			return 0, fmt.Errorf("%q: %w", s, ErrNegative)
		}
		return 0, fmt.Errorf("%q: %w", s, ErrBadNumber)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("%q: %w", s, ErrOverflow)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, ErrBadNumber)
	}
	v := math.Round(f * float64(mult))
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%q: %w", s, ErrOverflow)
	}
	return int64(v), nil
}

// FormatBytes renders b with a binary unit and two decimals ("23.69 GiB"),
// choosing the largest unit that keeps the number at or above 1.
func FormatBytes(b int64) string {
	neg := b < 0
	if neg {
		b = -b
	}
	var s string
	switch {
	case b >= TiB:
		s = fmt.Sprintf("%.2f TiB", float64(b)/float64(TiB))
	case b >= GiB:
		s = fmt.Sprintf("%.2f GiB", float64(b)/float64(GiB))
	case b >= MiB:
		s = fmt.Sprintf("%.2f MiB", float64(b)/float64(MiB))
	case b >= KiB:
		s = fmt.Sprintf("%.2f KiB", float64(b)/float64(KiB))
	default:
		s = fmt.Sprintf("%d B", b)
	}
	if neg {
		return "-" + s
	}
	return s
}

// Bytes is a byte count that reads and writes itself as a size string in
// TOML and JSON text form ("24GiB").
type Bytes int64

// UnmarshalText implements encoding.TextUnmarshaler.
func (b *Bytes) UnmarshalText(text []byte) error {
	n, err := ParseBytes(string(text))
	if err != nil {
		return err
	}
	*b = Bytes(n)
	return nil
}

// MarshalText implements encoding.TextMarshaler with the shortest exact form.
func (b Bytes) MarshalText() ([]byte, error) { return []byte(b.Exact()), nil }

// Int64 returns the count as an int64.
func (b Bytes) Int64() int64 { return int64(b) }

// String renders the size for people (two decimals, binary unit).
func (b Bytes) String() string { return FormatBytes(int64(b)) }

// Exact renders the size so that ParseBytes gives back the same count:
// the largest binary unit that divides it, else bytes.
func (b Bytes) Exact() string {
	n := int64(b)
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// OptionalBytes is a byte size that may be left empty: "" decodes to 0,
// which the owner of the key reads as "not set" (a default that depends on
// something else, say).
type OptionalBytes int64

// UnmarshalText implements encoding.TextUnmarshaler: "" or a size.
func (b *OptionalBytes) UnmarshalText(text []byte) error {
	if strings.TrimSpace(string(text)) == "" {
		*b = 0
		return nil
	}
	n, err := ParseBytes(string(text))
	if err != nil {
		return err
	}
	*b = OptionalBytes(n)
	return nil
}

// MarshalText implements encoding.TextMarshaler: "" when unset.
func (b OptionalBytes) MarshalText() ([]byte, error) {
	if b == 0 {
		return []byte{}, nil
	}
	return Bytes(b).MarshalText()
}

// Int64 returns the count (0: unset).
func (b OptionalBytes) Int64() int64 { return int64(b) }
