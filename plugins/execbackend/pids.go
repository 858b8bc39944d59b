package execbackend

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// groupPIDs lists the live processes in process group pgid (the app and
// the workers it started), from /proc.
func groupPIDs(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return []int{pgid}
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if g, ok := statPGID(string(data)); ok && g == pgid {
			out = append(out, pid)
		}
	}
	if !slices.Contains(out, pgid) {
		out = append(out, pgid)
	}
	slices.Sort(out)
	return out
}

// statPGID reads the process group (field 5) from /proc/PID/stat; the name
// (field 2) is in parentheses and may contain spaces and parentheses.
func statPGID(stat string) (int, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:]) // state ppid pgrp …
	if len(f) < 3 || f[0] == "Z" {
		return 0, false
	}
	g, err := strconv.Atoi(f[2])
	return g, err == nil
}
