package httpapi

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestLabelBounds(t *testing.T) {
	many := map[string]string{}
	for i := range maxLabels + 1 {
		many[fmt.Sprint("k", i)] = "v"
	}
	big := map[string]string{}
	for i := range 5 {
		big[fmt.Sprint("k", i)] = strings.Repeat("v", 1000)
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string // "" accepts
	}{
		{"none", nil, ""},
		{"at the bounds", map[string]string{strings.Repeat("k", maxLabelKey): strings.Repeat("v", maxLabelValue)}, ""},
		{"too many", many, "at most 32 are allowed"},
		{"long key", map[string]string{strings.Repeat("k", maxLabelKey+1): "v"}, "at most 128 are allowed"},
		{"60 KiB value", map[string]string{"note": strings.Repeat("v", 60<<10)}, "61440 bytes; at most 1024 are allowed"},
		{"too much together", big, "at most 4096 are allowed"},
		{"empty key", map[string]string{"": "v"}, "non-empty UTF-8 key"},
		{"not UTF-8", map[string]string{"k": "\xff"}, "UTF-8 value"},
		{"daemon's own", map[string]string{"wsched.job": "x"}, `labels starting with "wsched." are the daemon's own`},
	} {
		err := checkLabels(tc.labels)
		var he *httpError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.name, err)
		case tc.want != "" && (!errors.As(err, &he) || he.status != 400 || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want 400 saying %q", tc.name, err, tc.want)
		}
	}
}
