package packaging

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	// tagPattern: a vX.Y.Z tag with an optional pre-release part (v1.2.3-rc.1).
	tagPattern = regexp.MustCompile(`^v?([0-9]+\.[0-9]+\.[0-9]+)(?:-([0-9A-Za-z]+(?:[.-][0-9A-Za-z]+)*))?$`)
	// sincePattern: what git describe appends after a tag: commits since the tag and the commit.
	sincePattern = regexp.MustCompile(`-([0-9]+)-g([0-9a-f]{4,40})$`)
	// debianUpstreamVersion: what Debian allows as a version without epoch and revision.
	debianUpstreamVersion = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)
)

// DebianVersion turns `git describe --tags --match 'v[0-9]*' --dirty` output (or the Makefile's
// fallback v0.0.0-N-gHASH for a history without tags) into a Debian package version that sorts the
// way the builds were made:
//
//	v1.2.3                   1.2.3
//	v1.2.3-rc.1              1.2.3~rc.1            (before 1.2.3)
//	v1.2.3-4-gabc1234        1.2.3+git4.gabc1234   (after 1.2.3)
//	v1.2.3-4-gabc1234-dirty  1.2.3+git4.gabc1234.dirty
func DebianVersion(describe string) (string, error) {
	s := strings.TrimSpace(describe)
	s, dirty := strings.CutSuffix(s, "-dirty")
	var local []string
	if m := sincePattern.FindStringSubmatch(s); m != nil {
		local = append(local, "git"+m[1], "g"+m[2])
		s = strings.TrimSuffix(s, m[0])
	}
	if dirty {
		local = append(local, "dirty")
	}
	m := tagPattern.FindStringSubmatch(s)
	if m == nil {
		return "", fmt.Errorf("debian version from %q: %w", describe, ErrBadDescribe)
	}
	v := m[1]
	if m[2] != "" {
		v += "~" + strings.ReplaceAll(m[2], "-", ".")
	}
	if len(local) > 0 {
		v += "+" + strings.Join(local, ".")
	}
	if !debianUpstreamVersion.MatchString(v) {
		return "", fmt.Errorf("debian version from %q gave %q: %w", describe, v, ErrBadDescribe)
	}
	return v, nil
}
