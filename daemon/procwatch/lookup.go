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
	return w.lookup(procRoot, pid, false)
}

// lookup is Lookup; watch also makes an idle PID (see Unwatch) watched
// again, in the same critical section that found it alive, so an exit
// after that is reported.
func (w *Watcher) lookup(procRoot string, pid int, watch bool) (Info, error) {
	if pid <= 0 {
		return Info{}, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	if info, ok := w.cached(pid, watch); ok {
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

// Leader reports whether pid is a process (a thread group leader) this
// watcher holds a live pidfd for: pidfd_open refuses thread IDs, so such a
// PID needs no /proc read to be known as a process (see ThreadGroup).
func (w *Watcher) Leader(pid int) bool {
	_, ok := w.cached(pid, false)
	return ok
}

// cached returns the cached Info of a watched, live pid (watch: and makes
// an idle one watched again). A watched process found dead is forgotten and
// its exit reported here (once: the epoll loop no longer knows its pidfd),
// so the PID can be opened afresh; an idle one is only forgotten.
func (w *Watcher) cached(pid int, watch bool) (Info, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fd, ok := w.byPID[pid]
	if !ok || fd < 0 {
		return Info{}, false
	}
	// Watching needs no liveness check: the pidfd is in the epoll set, and
	// an exit not yet reported is reported by the loop, which now finds
	// the PID watched (report). A lookup must not answer for a process
	// that is gone, whose PID may have been reused.
	if !watch && !pidfdAlive(fd) {
		idle := w.idle.has(pid)
		w.forget(pid)
		if !idle { // nobody watches an idle PID's exit
			w.gone(pid)
		}
		return Info{}, false
	}
	info, ok := w.info[pid]
	if ok && watch {
		w.idle.remove(pid)
	}
	return info, ok
}

// pidfdAlive reports whether the process behind a pidfd has not exited.
func pidfdAlive(fd int) bool {
	err := unix.PidfdSendSignal(fd, 0, nil, 0)
	return err == nil || !errors.Is(err, unix.ESRCH)
}
