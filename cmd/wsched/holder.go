package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// shellHolder is whose lease `wsched lease` (without --hold) asks for: its
// parent, unless that parent is a subshell its shell forked for a command
// substitution (`eval "$(wsched lease … 2>/dev/null)"`, `out=$(… | …)`),
// which exits as soon as wsched does and would end the lease at once. Such
// a subshell is a fork that did not exec — the same executable and command
// line as its own parent — and leads no process group (an interactive
// shell does, with job control); the lease then goes to the nearest
// ancestor that is not one. pid is returned unchanged when /proc cannot say.
func shellHolder(procRoot string, pid int) int {
	for range 16 {
		st, err := readStat(procRoot, pid)
		if err != nil || st.pgrp == pid || st.ppid <= 1 {
			return pid
		}
		if !sameImage(procRoot, pid, st.ppid) {
			return pid
		}
		pid = st.ppid
	}
	return pid
}

type procStat struct{ ppid, pgrp int }

// readStat reads the parent and process group from /proc/PID/stat.
func readStat(procRoot string, pid int) (procStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", procRoot, pid))
	if err != nil {
		return procStat{}, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return procStat{}, fmt.Errorf("parse %s/%d/stat", procRoot, pid)
	}
	f := strings.Fields(s[i+1:]) // state ppid pgrp …
	if len(f) < 3 {
		return procStat{}, fmt.Errorf("parse %s/%d/stat", procRoot, pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return procStat{}, fmt.Errorf("parse %s/%d/stat", procRoot, pid)
	}
	return procStat{ppid: ppid, pgrp: pgrp}, nil
}

// sameImage reports whether a and b run the same executable with the same
// command line: b forked a and a did not exec.
func sameImage(procRoot string, a, b int) bool {
	ea, err1 := os.Readlink(fmt.Sprintf("%s/%d/exe", procRoot, a))
	eb, err2 := os.Readlink(fmt.Sprintf("%s/%d/exe", procRoot, b))
	if err1 != nil || err2 != nil || ea != eb {
		return false
	}
	ca, err1 := os.ReadFile(fmt.Sprintf("%s/%d/cmdline", procRoot, a))
	cb, err2 := os.ReadFile(fmt.Sprintf("%s/%d/cmdline", procRoot, b))
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}
