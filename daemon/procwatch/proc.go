// Package procwatch knows about other processes: who owns them, what they
// are called, when they started, and, through a Watcher, the moment they
// exit (pidfd on Linux 5.3+, polling otherwise).
package procwatch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrNoProcess means the PID does not exist (or is a zombie).
var ErrNoProcess = errors.New("no such process")

// Info describes a live process.
type Info struct {
	PID  int
	PPID int
	UID  int
	Name string
	// StartTicks is the start time in clock ticks since boot: with the PID,
	// it identifies the process across PID reuse.
	StartTicks uint64
}

// Read returns a process's owner, name, parent and start time from
// /proc (procRoot: "/proc", or a fake tree in tests).
func Read(procRoot string, pid int) (Info, error) {
	dir := fmt.Sprintf("%s/%d", procRoot, pid)
	st, err := os.Stat(dir)
	if err != nil {
		return Info{}, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	info := Info{PID: pid}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		info.UID = int(sys.Uid)
	}
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return Info{}, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	if err := parseStat(stat, &info); err != nil {
		return Info{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return info, nil
}

// parseStat reads comm, state, ppid and starttime from /proc/PID/stat. The
// name is in parentheses and may itself contain spaces and parentheses.
func parseStat(stat []byte, info *Info) error {
	open, close := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || close < open {
		return errors.New("malformed stat")
	}
	info.Name = string(stat[open+1 : close])
	fields := strings.Fields(string(stat[close+1:]))
	// fields[0] is state (field 3); ppid is field 4, starttime field 22.
	if len(fields) < 20 {
		return errors.New("short stat")
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return ErrNoProcess
	}
	ppid, err1 := strconv.Atoi(fields[1])
	start, err2 := strconv.ParseUint(fields[19], 10, 64)
	if err1 != nil || err2 != nil {
		return errors.New("malformed stat fields")
	}
	info.PPID, info.StartTicks = ppid, start
	return nil
}

// Alive reports whether pid is running and, when startTicks is not 0, is
// still the process that started then (not a reused PID).
func Alive(procRoot string, pid int, startTicks uint64) bool {
	info, err := Read(procRoot, pid)
	if err != nil {
		return false
	}
	return startTicks == 0 || info.StartTicks == startTicks
}
