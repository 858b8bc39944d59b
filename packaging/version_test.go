package packaging

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestDebianVersion(t *testing.T) {
	tests := []struct {
		describe string
		want     string
	}{
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v0.0.0-17-g9e57062", "0.0.0+git17.g9e57062"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.3+git4.gabc1234.dirty"},
		{"v1.2.3-dirty", "1.2.3+dirty"},
		{"v1.2.3-rc.1", "1.2.3~rc.1"},
		{"v1.2.3-rc-1", "1.2.3~rc.1"},
		{"v1.2.3-rc.1-2-gdeadbeef", "1.2.3~rc.1+git2.gdeadbeef"},
		{" v10.20.30\n", "10.20.30"},
	}
	for _, tt := range tests {
		got, err := DebianVersion(tt.describe)
		if err != nil || got != tt.want {
			t.Errorf("DebianVersion(%q) = %q, %v; want %q", tt.describe, got, err, tt.want)
		}
	}
}

func TestDebianVersionRejects(t *testing.T) {
	for _, describe := range []string{"", "dev", "v1.2", "v1.2.3.4", "9e57062", "v1.2.3-", "v1.2.3-rc..1", "v1.2.3-rc_1", "v1.2.3+meta", "v1.2.3 junk"} {
		if got, err := DebianVersion(describe); !errors.Is(err, ErrBadDescribe) {
			t.Errorf("DebianVersion(%q) = %q, %v; want ErrBadDescribe", describe, got, err)
		}
	}
}

// TestDebianVersionOrder checks with dpkg itself that the versions sort in build order.
func TestDebianVersionOrder(t *testing.T) {
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		t.Skip("dpkg not installed")
	}
	order := []string{"v1.2.3-rc.1", "v1.2.3-rc.1-2-gdeadbeef", "v1.2.3", "v1.2.3-dirty", "v1.2.3-4-gabc1234", "v1.2.4"}
	for i := 1; i < len(order); i++ {
		lo, _ := DebianVersion(order[i-1])
		hi, _ := DebianVersion(order[i])
		if out, err := exec.Command(dpkg, "--compare-versions", lo, "lt", hi).CombinedOutput(); err != nil {
			t.Errorf("dpkg says %s is not before %s: %v %s", lo, hi, err, strings.TrimSpace(string(out)))
		}
	}
}

func FuzzDebianVersion(f *testing.F) {
	for _, s := range []string{"v1.2.3", "v1.2.3-4-gabc1234-dirty", "v1.2.3-rc.1", "v0.0.0-1-g0000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, describe string) {
		v, err := DebianVersion(describe)
		if err != nil {
			if !errors.Is(err, ErrBadDescribe) {
				t.Fatalf("DebianVersion(%q): unexpected error %v", describe, err)
			}
			return
		}
		if !debianUpstreamVersion.MatchString(v) {
			t.Fatalf("DebianVersion(%q) = %q, not a Debian upstream version", describe, v)
		}
		if again, _ := DebianVersion(describe); again != v {
			t.Fatalf("DebianVersion(%q) not deterministic: %q then %q", describe, v, again)
		}
	})
}
