package config

import (
	"reflect"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// locate finds the line (1-based) on which key is set in TOML text, or 0.
// nth selects the n-th entry when the key's table is an array of tables.
// It understands [table] and [[array]] headers, dotted and quoted keys,
// and comments; it is a best-effort aid for error messages only.
func locate(data []byte, key []string, nth int) int {
	if len(key) == 0 {
		return 0
	}
	var table []string
	seen := map[string]int{}
	inArray, inTarget := false, false
	headerLine := 0
	for i, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(stripComment(raw))
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "[[") && strings.HasSuffix(line, "]]"):
			table = splitKey(line[2 : len(line)-2])
			k := strings.Join(table, ".")
			seen[k]++
			inArray = matchesTable(key, table)
			inTarget = inArray && seen[k]-1 == nth
			if inTarget && headerLine == 0 {
				headerLine = i + 1
			}
			continue
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			table = splitKey(line[1 : len(line)-1])
			inArray, inTarget = false, false
			if equalKeys(table, key) {
				return i + 1
			}
			continue
		}
		eq := strings.IndexByte(line, '=')
		if eq < 0 || (inArray && !inTarget) {
			continue
		}
		full := append(append([]string{}, table...), splitKey(line[:eq])...)
		if equalKeys(full, key) || (len(full) > len(key) && equalKeys(full[:len(key)], key)) {
			return i + 1
		}
	}
	return headerLine
}

func matchesTable(key, table []string) bool {
	return len(key) >= len(table) && equalKeys(key[:len(table)], table)
}

func equalKeys(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func stripComment(s string) string {
	inStr := byte(0)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inStr != 0 && c == inStr:
			inStr = 0
		case inStr == 0 && (c == '"' || c == '\''):
			inStr = c
		case inStr == 0 && c == '#':
			return s[:i]
		}
	}
	return s
}

func splitKey(s string) []string {
	var parts []string
	for _, p := range strings.Split(s, ".") {
		parts = append(parts, strings.Trim(strings.TrimSpace(p), `"'`))
	}
	return parts
}

// suggest returns the known key closest to an unknown one, or "".
func suggest(k toml.Key) string {
	known := knownKeys(reflect.TypeOf(Config{}), nil)
	best, bestDist := "", 4
	for _, cand := range known {
		if d := editDistance(k.String(), cand); d < bestDist {
			best, bestDist = cand, d
		}
	}
	return best
}

// knownKeys lists the dotted TOML keys of a struct type.
func knownKeys(t reflect.Type, prefix []string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("toml")
		if tag == "" || tag == "-" {
			continue
		}
		path := append(append([]string{}, prefix...), tag)
		out = append(out, strings.Join(path, "."))
		ft := f.Type
		for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if isSection(ft) {
			out = append(out, knownKeys(ft, path)...)
		}
	}
	sort.Strings(out)
	return out
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// isSection reports whether t is a struct of TOML keys (a table), not a
// value type such as time.Time.
func isSection(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		if tag := t.Field(i).Tag.Get("toml"); tag != "" && tag != "-" {
			return true
		}
	}
	return false
}
