package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// table renders rows in columns: text columns left-aligned, columns whose
// index is in right right-aligned. Lines in notes[i] are printed under row i,
// indented, outside the columns.
type table struct {
	header []string
	right  map[int]bool
	rows   [][]string
	notes  [][]string
}

func (t *table) add(row []string, notes ...string) {
	t.rows = append(t.rows, row)
	t.notes = append(t.notes, notes)
}

// visibleLen counts runes, ignoring ANSI color escapes.
func visibleLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] == 0x1b {
			if j := strings.IndexByte(s[i:], 'm'); j >= 0 {
				i += j + 1
				continue
			}
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
	}
	return n
}

func (t *table) render(w io.Writer, indent string) error {
	widths := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i, c := range r {
			widths[i] = max(widths[i], visibleLen(c))
		}
	}
	line := func(r []string) string {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-visibleLen(c))
			if t.right[i] {
				b.WriteString(pad + c)
			} else {
				b.WriteString(c + pad)
			}
			if i < len(r)-1 {
				b.WriteString("  ")
			}
		}
		return strings.TrimRight(b.String(), " ")
	}
	if _, err := fmt.Fprintln(w, line(t.header)); err != nil {
		return err
	}
	for i, r := range t.rows {
		fmt.Fprintln(w, line(r))
		for _, n := range t.notes[i] {
			fmt.Fprintln(w, indent+n)
		}
	}
	return nil
}
