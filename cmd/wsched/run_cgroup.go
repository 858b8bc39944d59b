package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/wsched/wsched/internal/cgroup"
)

// childCgroup gives `wsched run`'s child a cgroup of its own under this
// process's (issue 27), so that ending the run ends everything the child
// started, setsid or not. It returns nil (no cgroup; end does nothing) where
// none can be made: not root and no delegated subtree.
func childCgroup() (g *cgroup.Group, end func()) {
	m, err := cgroup.Open("/proc", fmt.Sprintf("wsched-run-%d", os.Getpid()))
	if err != nil {
		return nil, func() {}
	}
	if g, err = m.New("child"); err != nil {
		_ = m.Close()
		return nil, func() {}
	}
	return g, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = g.Remove(ctx)
		_ = m.Close()
	}
}
