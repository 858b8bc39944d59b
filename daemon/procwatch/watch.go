package procwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Watcher reports processes' exits on one channel. On Linux 5.3+ it opens a
// pidfd per process and waits on all of them with one epoll set, so an exit
// is seen at once; elsewhere it polls every PollInterval.
type Watcher struct {
	log    *slog.Logger
	exited chan int

	mu      sync.Mutex
	byPID   map[int]int    // pid → pidfd (−1 when polling)
	byFD    map[int]int    // pidfd → pid
	info    map[int]Info   // pid → what /proc said when its pidfd was opened (when first looked up, polling)
	roots   map[int]string // pid → the /proc it was read from (polling)
	idle    idleSet        // unwatched PIDs whose pidfds are kept a while
	epfd    int            // −1 when polling
	wakeFD  int            // eventfd that interrupts epoll_wait
	closed  bool
	polling bool
}

// PollInterval is how often the fallback checks watched processes.
const PollInterval = 250 * time.Millisecond

// NewWatcher returns a watcher; Run must run for exits to be reported.
func NewWatcher(log *slog.Logger) (*Watcher, error) {
	w := newWatcher(log)
	fd, err := unix.PidfdOpen(unix.Getpid(), 0)
	if err != nil {
		log.Warn("pidfd unavailable; watching holders by polling", "interval", PollInterval, "err", err)
		w.polling = true
		return w, nil
	}
	unix.Close(fd)
	if w.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if w.wakeFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		unix.Close(w.epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(w.wakeFD)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, w.wakeFD, &ev); err != nil {
		w.closeFDs()
		return nil, fmt.Errorf("epoll_ctl eventfd: %w", err)
	}
	return w, nil
}

func newWatcher(log *slog.Logger) *Watcher {
	return &Watcher{log: log, exited: make(chan int, 256), byPID: map[int]int{}, byFD: map[int]int{},
		info: map[int]Info{}, roots: map[int]string{}, idle: newIdleSet(), epfd: -1, wakeFD: -1}
}

// Exited delivers the PID of each watched process that exited, once.
func (w *Watcher) Exited() <-chan int { return w.exited }

// Watch starts watching pid. A process that is already gone is reported at
// once. Watching a PID twice is harmless.
func (w *Watcher) Watch(pid int) error {
	gone, err := w.open(pid)
	if gone {
		w.gone(pid)
	}
	return err
}

// open opens pid's pidfd and adds it to the epoll set; gone is true when
// there is no such process.
func (w *Watcher) open(pid int) (gone bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false, errors.New("watcher closed")
	}
	if _, ok := w.byPID[pid]; ok {
		w.idle.remove(pid) // watched again
		return false, nil
	}
	if w.polling {
		w.byPID[pid] = -1
		return false, nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return false, fmt.Errorf("epoll_ctl pidfd %d: %w", pid, err)
	}
	w.byPID[pid], w.byFD[fd] = fd, pid
	return false, nil
}

// WatchProcess watches pid if it is still the process that started at
// startTicks (0: any); a PID that was reused is reported as exited at once.
// The start time is compared with the one cached when the pidfd was opened
// (see Lookup): watching a holder already looked up reads nothing from /proc.
func (w *Watcher) WatchProcess(procRoot string, pid int, startTicks uint64) error {
	info, err := w.lookup(procRoot, pid, true)
	if errors.Is(err, ErrNoProcess) || (err == nil && startTicks != 0 && info.StartTicks != startTicks) {
		w.Unwatch(pid)
		w.gone(pid)
		return nil
	}
	return err
}

// gone reports pid as exited without blocking the caller.
func (w *Watcher) gone(pid int) {
	select {
	case w.exited <- pid:
	default:
		go func() { w.exited <- pid }()
	}
}

// Unwatch stops watching pid: its exit is no longer reported. Its pidfd
// (and what /proc said) is kept for a while, a bounded number of them (see
// idleSet), so a process that takes a lease again soon is known at once.
func (w *Watcher) Unwatch(pid int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fd, ok := w.byPID[pid]
	if !ok {
		return
	}
	if fd < 0 {
		w.forget(pid)
		return
	}
	for _, old := range w.idle.add(pid, time.Now()) {
		w.forget(old)
	}
}

// wake interrupts the loop's epoll_wait; callers hold w.mu.
func (w *Watcher) wake() {
	if w.wakeFD >= 0 {
		_, _ = unix.Write(w.wakeFD, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
}

// sweepIdle forgets the PIDs idle for longer than idleKeep and returns the
// epoll timeout in milliseconds until the next one expires, idleKeep when
// none is idle (so one that becomes idle is swept within twice idleKeep,
// without waking the loop for each).
func (w *Watcher) sweepIdle() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	evict, next := w.idle.expired(time.Now())
	for _, pid := range evict {
		w.forget(pid)
	}
	if next < 0 {
		next = idleKeep
	}
	return int(next/time.Millisecond) + 1
}

func (w *Watcher) forget(pid int) {
	fd, ok := w.byPID[pid]
	if !ok {
		return
	}
	delete(w.byPID, pid)
	delete(w.info, pid)
	delete(w.roots, pid)
	w.idle.remove(pid)
	if fd >= 0 {
		delete(w.byFD, fd)
		_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil)
		unix.Close(fd)
	}
}

// Run reports exits until ctx ends, then releases its descriptors.
func (w *Watcher) Run(ctx context.Context) error {
	defer w.shutdown()
	if w.polling {
		return w.poll(ctx)
	}
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.wake()
	})
	defer stop()
	events := make([]unix.EpollEvent, 64)
	var buf [8]byte
	for {
		n, err := unix.EpollWait(w.epfd, events, w.sweepIdle())
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		for _, ev := range events[:n] {
			if int(ev.Fd) == w.wakeFD {
				_, _ = unix.Read(w.wakeFD, buf[:]) // reset: the eventfd is level-triggered
				continue
			}
			if !w.report(ctx, int(ev.Fd)) {
				return nil
			}
		}
	}
}

// report forgets the process behind fd and sends its PID, unless ctx ends
// first (then it returns false: nobody reads exits any more).
func (w *Watcher) report(ctx context.Context, fd int) bool {
	w.mu.Lock()
	pid, ok := w.byFD[fd]
	idle := ok && w.idle.has(pid)
	if ok {
		w.forget(pid)
	}
	w.mu.Unlock()
	if !ok || idle { // nobody watches an idle PID's exit
		return true
	}
	select {
	case w.exited <- pid:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *Watcher) poll(ctx context.Context) error {
	t := time.NewTimer(PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		w.mu.Lock()
		var gone []int
		for pid := range w.byPID {
			if !w.stillThere(pid) {
				gone = append(gone, pid)
				w.forget(pid)
			}
		}
		w.mu.Unlock()
		for _, pid := range gone {
			select {
			case w.exited <- pid:
			case <-ctx.Done():
				return nil
			}
		}
		t.Reset(PollInterval)
	}
}

// stillThere reports whether a polled pid still runs and, when it was
// looked up, is still the process that started then: a PID reused between
// two polls is the old process's exit, not its continuation.
func (w *Watcher) stillThere(pid int) bool {
	was, ok := w.info[pid]
	if !ok {
		return !errors.Is(unix.Kill(pid, 0), unix.ESRCH)
	}
	now, err := Read(w.roots[pid], pid)
	return err == nil && now.StartTicks == was.StartTicks
}

func (w *Watcher) shutdown() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for pid := range w.byPID {
		w.forget(pid)
	}
	w.closeFDs()
}

func (w *Watcher) closeFDs() {
	if w.wakeFD >= 0 {
		unix.Close(w.wakeFD)
		w.wakeFD = -1
	}
	if w.epfd >= 0 {
		unix.Close(w.epfd)
		w.epfd = -1
	}
}
