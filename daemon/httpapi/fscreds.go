package httpapi

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// creds are the file-system credentials a path is opened with: the
// client's uid, primary gid and supplementary groups.
type creds struct {
	UID, GID int
	Groups   []int
}

// asCreds runs fn on an OS thread whose file-system uid, gid and
// supplementary groups are c's (setfsuid, setfsgid and a per-thread
// setgroups), so that every permission the kernel checks in fn (mode bits,
// POSIX ACLs, directory search, LSMs) is checked for the client rather than
// for the daemon. The thread is locked for the call; when its credentials
// cannot be restored it is never unlocked, and the runtime ends it with the
// goroutine. It needs CAP_SETUID and CAP_SETGID.
func asCreds(c creds, fn func() (*os.File, error)) (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, err, restored := switchAndRun(c, fn)
		done <- result{f, err}
		if restored {
			runtime.UnlockOSThread()
		}
	}()
	r := <-done
	return r.f, r.err
}

// switchAndRun sets the locked thread's credentials, runs fn, and restores
// them; restored is false when the thread must not be used again.
func switchAndRun(c creds, fn func() (*os.File, error)) (f *os.File, err error, restored bool) {
	origGroups, err := unix.Getgroups()
	if err != nil {
		return nil, fmt.Errorf("getgroups: %w", err), true
	}
	origUID, origGID := os.Geteuid(), os.Getegid()
	restore := func() bool {
		return setThreadGroups(origGroups) == nil && setFSGID(origGID) == nil && setFSUID(origUID) == nil && threadGroupsAre(origGroups)
	}
	if err := switchTo(c); err != nil {
		if !restore() {
			return nil, fmt.Errorf("take uid %d's credentials: %w (and restoring the daemon's failed)", c.UID, err), false
		}
		return nil, fmt.Errorf("take uid %d's credentials: %w", c.UID, err), true
	}
	f, err = fn()
	if !restore() {
		return f, err, false
	}
	return f, err, true
}

// switchTo sets groups first, then fsgid, then fsuid: setting fsuid to a
// non-zero uid clears the thread's file-system capabilities.
func switchTo(c creds) error {
	if err := setThreadGroups(c.Groups); err != nil {
		return err
	}
	if err := setFSGID(c.GID); err != nil {
		return err
	}
	return setFSUID(c.UID)
}

// setFSUID sets the thread's fsuid and checks that it took: setfsuid(2)
// reports failure only by returning the old value.
func setFSUID(uid int) error {
	if _, err := unix.SetfsuidRetUid(uid); err != nil {
		return fmt.Errorf("setfsuid %d: %w", uid, err)
	}
	if now, _ := unix.SetfsuidRetUid(uid); now != uid {
		return fmt.Errorf("setfsuid %d: the thread kept fsuid %d", uid, now)
	}
	return nil
}

func setFSGID(gid int) error {
	if _, err := unix.SetfsgidRetGid(gid); err != nil {
		return fmt.Errorf("setfsgid %d: %w", gid, err)
	}
	if now, _ := unix.SetfsgidRetGid(gid); now != gid {
		return fmt.Errorf("setfsgid %d: the thread kept fsgid %d", gid, now)
	}
	return nil
}

// setThreadGroups calls setgroups(2) directly: unix.Setgroups (like
// syscall.Setgroups) changes every thread of the process.
func setThreadGroups(groups []int) error {
	gids := make([]uint32, len(groups))
	for i, g := range groups {
		gids[i] = uint32(g)
	}
	var p unsafe.Pointer
	if len(gids) > 0 {
		p = unsafe.Pointer(&gids[0])
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(gids)), uintptr(p), 0); errno != 0 {
		return fmt.Errorf("setgroups: %w", errno)
	}
	return nil
}

func threadGroupsAre(want []int) bool {
	got, err := unix.Getgroups()
	if err != nil {
		return false
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	return slices.Equal(got, want)
}
