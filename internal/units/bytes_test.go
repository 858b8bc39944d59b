package units

import (
	"errors"
	"testing"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  error
	}{
		{"24GiB", 24 * GiB, nil},
		{"512MiB", 512 * MiB, nil},
		{"1.5GB", 1_500_000_000, nil},
		{"512 mib", 512 * MiB, nil},
		{"0B", 0, nil},
		{"7b", 7, nil},
		{"2kB", 2000, nil},
		{"0.5KiB", 512, nil},
		{"1TiB", TiB, nil},
		{"", 0, ErrEmpty},
		{"   ", 0, ErrEmpty},
		{"24", 0, ErrNoUnit},
		{"24GiBs", 0, ErrUnknownUnit},
		{"24 furlongs", 0, ErrUnknownUnit},
		{"GiB", 0, ErrBadNumber},
		{"1.2.3GB", 0, ErrBadNumber},
		{"-1GiB", 0, ErrNegative},
		{"+1GiB", 0, ErrBadNumber},
		{"9999999999TiB", 0, ErrOverflow},
		{"1e400GB", 0, ErrUnknownUnit},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("ParseBytes(%q) error = %v, want %v", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	tests := map[int64]string{
		0:           "0 B",
		1023:        "1023 B",
		KiB:         "1.00 KiB",
		828 * MiB:   "828.00 MiB",
		25436971827: "23.69 GiB",
		-2 * GiB:    "-2.00 GiB",
		3 * TiB:     "3.00 TiB",
	}
	for in, want := range tests {
		if got := FormatBytes(in); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestBytesTextRoundTrip(t *testing.T) {
	for _, n := range []int64{0, 1, 1000, KiB, 3 * MiB, 24 * GiB, 1_500_000_000, 2 * TiB} {
		text, err := Bytes(n).MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var b Bytes
		if err := b.UnmarshalText(text); err != nil || int64(b) != n {
			t.Errorf("round trip %d via %q = %d, %v", n, text, b, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	if d, err := ParseDuration("500ms"); err != nil || d.Milliseconds() != 500 {
		t.Errorf("ParseDuration(500ms) = %v, %v", d, err)
	}
	for in, want := range map[string]error{"": ErrEmpty, "5": ErrBadNumber, "-1s": ErrNegative, "soon": ErrBadNumber} {
		if _, err := ParseDuration(in); !errors.Is(err, want) {
			t.Errorf("ParseDuration(%q) error = %v, want %v", in, err, want)
		}
	}
}

// FuzzParseBytes checks that the parser never panics, never returns a
// negative count, and that whatever it accepts survives a format round trip.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"24GiB", "1.5GB", "0B", "512 MiB", "-1KB", "1e9GB", ".5TiB", "9223372036854775807B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("ParseBytes(%q) = %d < 0", s, n)
		}
		text, _ := Bytes(n).MarshalText()
		m, err := ParseBytes(string(text))
		if err != nil || m != n {
			t.Fatalf("round trip of %q: %d -> %q -> %d, %v", s, n, text, m, err)
		}
	})
}

func TestOptionalBytes(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "  ": 0, "512MiB": 512 * MiB} {
		var b OptionalBytes
		if err := b.UnmarshalText([]byte(in)); err != nil || b.Int64() != want {
			t.Errorf("%q: %d, %v; want %d", in, b, err, want)
		}
		out, err := b.MarshalText()
		if err != nil || (want == 0) != (len(out) == 0) {
			t.Errorf("%q: marshals to %q, %v", in, out, err)
		}
	}
	var b OptionalBytes
	if err := b.UnmarshalText([]byte("400")); err == nil {
		t.Error("a bare number is still refused")
	}
}
