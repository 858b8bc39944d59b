package packaging

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// unitFile is a parsed systemd unit: section → key → values in file order (keys may repeat).
type unitFile map[string]map[string][]string

// parseUnit reads a unit file the simple way its authors wrote it: [Section] lines, Key=Value lines,
// # and ; comments. A line continued with a backslash is a test failure (none are used).
func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case strings.HasSuffix(line, `\`):
			t.Fatalf("%s:%d: continuation lines are not supported by this test", path, n)
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a Key=Value line in a section: %q", path, n, line)
			}
			u[section][key] = append(u[section][key], value)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// get returns the last value of section/key ("" when unset), as systemd lets later lines win.
func (u unitFile) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// words splits every value of section/key into space-separated words (Environment=, DeviceAllow=, …).
func (u unitFile) words(section, key string) []string {
	var out []string
	for _, v := range u[section][key] {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

// environment returns the variables set by Environment= lines.
func (u unitFile) environment() map[string]string {
	env := map[string]string{}
	for _, w := range u.words("Service", "Environment") {
		k, v, _ := strings.Cut(w, "=")
		env[k] = v
	}
	return env
}
