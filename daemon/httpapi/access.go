package httpapi

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// peerGIDs are the peer's supplementary groups as the kernel reported them
// at connect time, else as /proc says now.
func peerGIDs(procRoot string, peer Peer) []int {
	if peer.Groups != nil {
		return slices.Clone(peer.Groups)
	}
	return supplementaryGroups(procRoot, peer.PID)
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
