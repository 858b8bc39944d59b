package confval

import (
	"errors"
	"testing"
)

func TestFraction(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Fraction
		ok   bool
	}{{"0.5", 0.5, true}, {"1", 1, true}, {"0", 0, true}, {"1.5", 0, false}, {"-0.1", 0, false}, {"x", 0, false}} {
		var f Fraction
		err := f.UnmarshalText([]byte(tt.in))
		if (err == nil) != tt.ok || f != tt.want {
			t.Errorf("%q: %v, %v", tt.in, f, err)
		}
	}
	if b, _ := Fraction(0.25).MarshalText(); string(b) != "0.25" {
		t.Errorf("MarshalText = %s", b)
	}
}

func TestEnumAndBad(t *testing.T) {
	if v, err := Enum(" Spread ", "spread", "binpack"); v != "spread" || err != nil {
		t.Errorf("Enum = %q, %v", v, err)
	}
	if _, err := Enum("x", "a", "b"); err == nil || err.Error() != `"x" is not allowed: want one of a, b` {
		t.Errorf("Enum error = %v", err)
	}
	err := Bad("sim#1.memory", "%d is bad", 3)
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Key != "sim#1.memory" || !errors.Is(err, ErrBadValue) || err.Error() != "sim#1.memory: 3 is bad" {
		t.Errorf("Bad = %v", err)
	}
}
