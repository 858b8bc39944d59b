package daemon

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	gids := append(supplementaryGroups(procRoot, peer.PID), peer.GID)
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

// permits reports whether uid/gids have the permission bit (4 read, 1
// execute) on path.
func permits(path string, uid int, gids []int, bit os.FileMode) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
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
