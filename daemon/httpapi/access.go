package httpapi

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// readableBy checks that the user behind peer could read path themselves:
// execute permission on every directory on the way and read permission on
// the file, by owner, group (primary and supplementary) or others. The
// daemon may run as root; it must not read files for clients that could not.
func readableBy(procRoot string, peer Peer, path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%q is not an absolute path", path)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if peer.IsRoot() {
		return nil
	}
	gids := append(peerGIDs(procRoot, peer), peer.GID)
	for dir := filepath.Dir(real); ; dir = filepath.Dir(dir) {
		if !permits(dir, peer.UID, gids, 1) {
			return fmt.Errorf("%s: uid %d may not enter %s", path, peer.UID, dir)
		}
		if dir == "/" {
			break
		}
	}
	if !permits(real, peer.UID, gids, 4) {
		return fmt.Errorf("%s: uid %d may not read it", path, peer.UID)
	}
	return nil
}

// peerGIDs are the peer's supplementary groups as the kernel reported them
// at connect time, else as /proc says now.
func peerGIDs(procRoot string, peer Peer) []int {
	if peer.Groups != nil {
		return slices.Clone(peer.Groups)
	}
	return supplementaryGroups(procRoot, peer.PID)
}

// permits reports whether uid/gids have the permission bit (4 read, 1
// execute) on path.
func permits(path string, uid int, gids []int, bit os.FileMode) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	return permitsStat(st, uid, gids, bit)
}

func permitsStat(st os.FileInfo, uid int, gids []int, bit os.FileMode) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	mode := st.Mode().Perm()
	switch {
	case int(sys.Uid) == uid:
		return mode&(bit<<6) != 0
	case slices.Contains(gids, int(sys.Gid)):
		return mode&(bit<<3) != 0
	}
	return mode&bit != 0
}

// supplementaryGroups reads the Groups: line of /proc/PID/status.
func supplementaryGroups(procRoot string, pid int) []int {
	f, err := os.Open(fmt.Sprintf("%s/%d/status", procRoot, pid))
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Groups:"); ok {
			var gids []int
			for _, g := range strings.Fields(rest) {
				if n, err := strconv.Atoi(g); err == nil {
					gids = append(gids, n)
				}
			}
			return gids
		}
	}
	return nil
}

// snapshotAudio takes audio a client named by path: after the permission
// check it opens the checked path without following any symlink, checks the
// opened file again (regular, readable by the client), and copies it into
// the daemon's spool. The job then reads the copy, so swapping the path
// after the check cannot make the daemon read a file the client may not.
func (s *Server) snapshotAudio(peer Peer, path string) (string, error) {
	if err := readableBy(s.procRoot, peer, path); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	f, err := openNoFollow(real)
	if err != nil {
		return "", fmt.Errorf("%s changed while it was checked: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	if !peer.IsRoot() && !permitsStat(st, peer.UID, append(peerGIDs(s.procRoot, peer), peer.GID), 4) {
		return "", fmt.Errorf("%s: uid %d may not read it", path, peer.UID)
	}
	return s.saveUpload(namedReader{f, filepath.Base(real)}, int64(s.cfg.Jobs.MaxUpload))
}

// openNoFollow opens path read-only with no symlink anywhere on the way
// (openat2 RESOLVE_NO_SYMLINKS; O_NOFOLLOW on kernels before 5.6), without
// blocking on a FIFO.
func openNoFollow(path string) (*os.File, error) {
	how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, how)
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// namedReader gives saveUpload the file name (for its extension).
type namedReader struct {
	*os.File
	name string
}

func (n namedReader) FileName() string { return n.name }
