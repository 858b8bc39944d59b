package procwatch

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Lookup returns pid's owner, name and start time, and watches it. /proc is
// read once, when the process's pidfd is opened; later lookups answer from
// that cache for as long as the pidfd shows the process alive (one
// pidfd_send_signal with signal 0, no file read), so a PID that was reused
// after an exit is never mistaken for the cached process. Without pidfd
// every lookup reads /proc.
func (w *Watcher) Lookup(procRoot string, pid int) (Info, error) {
	if pid <= 0 {
		return Info{}, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	if info, ok := w.cached(pid); ok {
		return info, nil
	}
	gone, err := w.open(pid)
	if err != nil {
		return Info{}, err
	}
	if gone {
		return Info{}, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	info, err := Read(procRoot, pid)
	if err != nil {
		return Info{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// The pidfd was opened before /proc was read: if it still shows the
	// process alive, what was read is that process, and stays true until
	// the pidfd reports its exit.
	fd, ok := w.byPID[pid]
	switch {
	case ok && fd >= 0:
		if !pidfdAlive(fd) {
			return Info{}, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
		}
		w.info[pid] = info
	case ok && w.info[pid].StartTicks == 0:
		// Polling: the first reading is the watched process; each poll
		// compares the start time with it.
		w.info[pid], w.roots[pid] = info, procRoot
	}
	return info, nil
}

// cached returns the cached Info of a watched, live pid. A watched process
// found dead is forgotten and its exit reported here (once: the epoll loop
// no longer knows its pidfd), so the PID can be opened afresh.
func (w *Watcher) cached(pid int) (Info, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fd, ok := w.byPID[pid]
	if !ok || fd < 0 {
		return Info{}, false
	}
	if !pidfdAlive(fd) {
		w.forget(pid)
		w.gone(pid)
		return Info{}, false
	}
	info, ok := w.info[pid]
	return info, ok
}

// pidfdAlive reports whether the process behind a pidfd has not exited.
func pidfdAlive(fd int) bool {
	err := unix.PidfdSendSignal(fd, 0, nil, 0)
	return err == nil || !errors.Is(err, unix.ESRCH)
}
