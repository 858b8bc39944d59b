package models

import "testing"

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in           string
		start, total int64
		ok           bool
	}{
		{"bytes 100-199/200", 100, 200, true},
		{"bytes 0-0/1", 0, 1, true},
		{"bytes 5-9/*", 5, -1, true},
		{"bytes 100-199/150", 0, 0, false},
		{"bytes 9-5/20", 0, 0, false},
		{"bytes */200", 0, 0, false},
		{"items 1-2/3", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		start, total, ok := parseContentRange(tt.in)
		if start != tt.start || total != tt.total || ok != tt.ok {
			t.Errorf("parseContentRange(%q) = %d, %d, %v", tt.in, start, total, ok)
		}
	}
	if n, ok := parseUnsatisfiedRange("bytes */3145745"); n != 3145745 || !ok {
		t.Errorf("parseUnsatisfiedRange = %d, %v", n, ok)
	}
	if _, ok := parseUnsatisfiedRange("bytes 0-1/2"); ok {
		t.Error("parseUnsatisfiedRange accepted a satisfied range")
	}
}

func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 100-199/200", "bytes 5-9/*", "bytes */200", "bytes -1-5/9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start, total, ok := parseContentRange(s)
		if ok && (start < 0 || (total != -1 && total <= start)) {
			t.Errorf("%q: start %d, total %d accepted", s, start, total)
		}
		if n, ok := parseUnsatisfiedRange(s); ok && n < 0 {
			t.Errorf("%q: total %d accepted", s, n)
		}
	})
}
